-- Workflows and what follows a task's end besides its plain dependents (duetime/store/core/
-- follow.py, graph.py, workflows.py; docs/api.md "Workflows"). As in PostgreSQL's.

CREATE TABLE workflows (
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant_id        TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT,
    labels           TEXT    NOT NULL DEFAULT '{}',
    node_count       INTEGER NOT NULL,
    idempotency_key  TEXT,
    request_hash     TEXT,
    created_at       INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX workflows_idempotency_key ON workflows (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX workflows_tenant ON workflows (tenant_id, id DESC);

-- Removed with its task (retention), as task_deps rows are.
CREATE TABLE task_follow (
    task_id            TEXT    NOT NULL PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    tenant_id          TEXT    NOT NULL,
    on_parent_failure  TEXT    NOT NULL DEFAULT 'fail'
                       CHECK (on_parent_failure IN ('fail', 'run', 'cancel')),
    parents_in_body    INTEGER NOT NULL DEFAULT 0,
    callbacks          TEXT,
    workflow_id        TEXT,
    ref                TEXT,
    spawned_by         TEXT
) STRICT, WITHOUT ROWID;
CREATE INDEX task_follow_workflow ON task_follow (workflow_id, task_id)
    WHERE workflow_id IS NOT NULL;
CREATE INDEX task_follow_spawned_by ON task_follow (spawned_by, task_id)
    WHERE spawned_by IS NOT NULL;
