-- Workflows and what follows a task's end besides its plain dependents (duetime/store/core/
-- follow.py, graph.py, workflows.py; docs/api.md "Workflows").

-- A workflow: a DAG of tasks created in one call. Its nodes are tasks (task_follow names them);
-- its status is folded from theirs on every read (duetime/graph.py), so no statement of the hot
-- path ever writes it.
CREATE TABLE workflows (
    id               uuid PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             text,
    labels           jsonb NOT NULL DEFAULT '{}',
    node_count       integer NOT NULL,
    idempotency_key  text,
    request_hash     text,
    created_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX workflows_idempotency_key_idx ON workflows (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX workflows_tenant_idx ON workflows (tenant_id, id DESC);

-- One row for a task whose end has more to do than its task_deps (a task without one, nearly
-- every task, costs nothing): its policy when a parent fails, whether a push delivery sends its
-- parents' outcomes, the callbacks its end makes, the workflow it is a node of (and its ref
-- there), the task whose handler spawned it. A task with callbacks has has_dependents set, so
-- its completion runs the settle step (duetime.store.core.follow.settle).
CREATE TABLE task_follow (
    task_id            uuid PRIMARY KEY,
    tenant_id          text NOT NULL,
    on_parent_failure  text NOT NULL DEFAULT 'fail'
                       CHECK (on_parent_failure IN ('fail', 'run', 'cancel')),
    parents_in_body    boolean NOT NULL DEFAULT false,
    callbacks          jsonb,
    workflow_id        uuid,
    ref                text,
    spawned_by         uuid
);
CREATE INDEX task_follow_workflow_idx ON task_follow (workflow_id, task_id)
    WHERE workflow_id IS NOT NULL;
CREATE INDEX task_follow_spawned_by_idx ON task_follow (spawned_by, task_id)
    WHERE spawned_by IS NOT NULL;
