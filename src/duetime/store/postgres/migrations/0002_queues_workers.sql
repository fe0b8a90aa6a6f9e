-- Queues and pull workers (SPEC §3 "Queues and pull workers").

-- A queue's settings. A queue needs no row to exist: tasks name it, and a queue without a row
-- behaves as all defaults (not paused, no limits). Claims look a task's queue up by primary key
-- (tenant_id, name) to skip paused queues and to route limited ones through the locked path.
CREATE TABLE queues (
    tenant_id                text NOT NULL,
    name                     text NOT NULL,
    rate_limit_per_second    double precision,
    burst                    integer,
    max_concurrency          integer CHECK (max_concurrency > 0),
    max_concurrency_per_key  integer CHECK (max_concurrency_per_key > 0),
    paused                   boolean NOT NULL DEFAULT false,
    updated_at               timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- Pull workers as the lease API sees them (lease polls and heartbeats).
CREATE TABLE workers (
    tenant_id      text NOT NULL,
    worker_id      text NOT NULL,
    queues         text[] NOT NULL DEFAULT '{}',
    first_seen_at  timestamptz NOT NULL,
    last_seen_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, worker_id)
);
-- GET /v1/workers: the tenant's recently seen workers.
CREATE INDEX workers_last_seen_idx ON workers (tenant_id, last_seen_at);

-- The lease API always claims for one tenant: lead the index with it, so one tenant's backlog in
-- a queue costs nothing to another tenant polling a queue of the same name. Replaces the index
-- of 0001 (same predicate, same readers), so transitions pay for no extra index.
DROP INDEX tasks_ready_worker_idx;
CREATE INDEX tasks_ready_worker_idx ON tasks (tenant_id, queue, priority DESC, due_at)
    WHERE status = 'ready' AND target_type = 'worker';
