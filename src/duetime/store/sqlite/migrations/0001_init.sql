-- duetime's SQLite schema, version 1. It mirrors the PostgreSQL schema column for column.
--
-- Conventions (why they differ from PostgreSQL):
--   * Every timestamp is INTEGER microseconds since 1970-01-01 UTC: it sorts correctly, indexes
--     compactly and round-trips PostgreSQL's microsecond timestamptz exactly.
--   * uuid columns are TEXT in the canonical lowercase 8-4-4-4-12 form, so text order = uuid order.
--   * jsonb columns (target, retry, labels) and uuid[] (depends_on) are JSON text; booleans are
--     INTEGER 0/1. Tables are STRICT so a wrong type is an error, not silently stored.
-- Foreign keys are enforced (PRAGMA foreign_keys = ON) except tasks.tenant_id, which PostgreSQL
-- does not constrain either.

CREATE TABLE tenants (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key_hash    TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE signing_secrets (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    secret      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER
) STRICT;
CREATE INDEX signing_secrets_tenant ON signing_secrets (tenant_id, created_at);

CREATE TABLE tasks (
    id                TEXT    NOT NULL PRIMARY KEY,
    tenant_id         TEXT    NOT NULL,
    name              TEXT,
    queue             TEXT    NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('scheduled', 'blocked', 'ready',
                          'running', 'retrying', 'succeeded', 'failed', 'cancelled')),
    version           INTEGER NOT NULL,
    target_type       TEXT    NOT NULL,
    target            TEXT    NOT NULL,
    payload           TEXT    NOT NULL,
    idempotency_key   TEXT,
    priority          INTEGER NOT NULL,
    retry             TEXT    NOT NULL,
    timeout_seconds   REAL    NOT NULL,
    depends_on        TEXT    NOT NULL,
    pending_parents   INTEGER NOT NULL,
    has_dependents    INTEGER NOT NULL,
    concurrency_key   TEXT,
    labels            TEXT    NOT NULL,
    attempts          INTEGER NOT NULL,
    series_start      INTEGER NOT NULL,
    schedule_id       TEXT,
    scheduled_for     INTEGER,
    run_at            INTEGER NOT NULL,
    due_at            INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    last_error        TEXT,
    result            TEXT,
    lease_id          TEXT,
    lease_expires_at  INTEGER,
    worker_id         TEXT,
    cancel_requested  INTEGER NOT NULL
) STRICT;

-- Idempotent creation.
CREATE UNIQUE INDEX tasks_idempotency ON tasks (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Promoter. Queries must repeat this WHERE text exactly for SQLite to pick the partial index.
CREATE INDEX tasks_due ON tasks (due_at) WHERE status IN ('scheduled', 'retrying');
-- Dispatcher (push targets) and lease API (worker targets).
CREATE INDEX tasks_ready_push ON tasks (priority DESC, due_at)
    WHERE status = 'ready' AND target_type <> 'worker';
CREATE INDEX tasks_ready_worker ON tasks (queue, priority DESC, due_at)
    WHERE status = 'ready' AND target_type = 'worker';
-- Reaper, and heartbeats (which know only the lease id).
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_lease ON tasks (lease_id) WHERE lease_id IS NOT NULL;
-- Listing.
CREATE INDEX tasks_tenant ON tasks (tenant_id, id DESC);
CREATE INDEX tasks_tenant_status ON tasks (tenant_id, status, id DESC);
CREATE INDEX tasks_schedule ON tasks (schedule_id, scheduled_for) WHERE schedule_id IS NOT NULL;

-- parent -> child edges, so a finished parent finds its dependents.
CREATE TABLE task_deps (
    parent_id  TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    child_id   TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    PRIMARY KEY (parent_id, child_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX task_deps_child ON task_deps (child_id);

CREATE TABLE attempts (
    task_id      TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    number       INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    outcome      TEXT    NOT NULL,
    error        TEXT,
    http_status  INTEGER,
    duration_ms  REAL    NOT NULL,
    worker       TEXT,
    PRIMARY KEY (task_id, number)
) STRICT, WITHOUT ROWID;

CREATE TABLE leaders (
    name        TEXT    NOT NULL PRIMARY KEY,
    node_id     TEXT    NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
