-- Queues and pull workers (SPEC §3 "Queues and pull workers"); mirrors the PostgreSQL migration.

-- A queue's settings. A queue needs no row to exist: tasks name it, and a queue without a row
-- behaves as all defaults (not paused, no limits).
CREATE TABLE queues (
    tenant_id                TEXT    NOT NULL,
    name                     TEXT    NOT NULL,
    rate_limit_per_second    REAL,
    burst                    INTEGER,
    max_concurrency          INTEGER CHECK (max_concurrency > 0),
    max_concurrency_per_key  INTEGER CHECK (max_concurrency_per_key > 0),
    paused                   INTEGER NOT NULL DEFAULT 0,
    updated_at               INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT, WITHOUT ROWID;

-- Pull workers as the lease API sees them; queues is a JSON array of names.
CREATE TABLE workers (
    tenant_id      TEXT    NOT NULL,
    worker_id      TEXT    NOT NULL,
    queues         TEXT    NOT NULL DEFAULT '[]',
    first_seen_at  INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, worker_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX workers_last_seen ON workers (tenant_id, last_seen_at);

-- The lease API always claims for one tenant: lead the index with it (replaces 0001's).
DROP INDEX tasks_ready_worker;
CREATE INDEX tasks_ready_worker ON tasks (tenant_id, queue, priority DESC, due_at)
    WHERE status = 'ready' AND target_type = 'worker';
