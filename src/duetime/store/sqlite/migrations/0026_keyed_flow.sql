-- Keyed flow control (SPEC §7 "Keyed flow control"); mirrors the PostgreSQL migration.

-- A task's key under its queue's keyed rate limit (NULL: none then; '': no value for it), and
-- a debounce's absorbed creates.
ALTER TABLE tasks ADD COLUMN flow_key TEXT;
ALTER TABLE tasks ADD COLUMN absorbed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN absorbed_at INTEGER;

-- Ready tasks with a flow key, by (tenant, queue, key) in each key's claim order.
CREATE INDEX tasks_ready_flow
    ON tasks (tenant_id, queue, flow_key, priority DESC, due_at, created_at, id)
    WHERE status = 'ready' AND flow_key IS NOT NULL;

-- A queue's flow rules (JSON), and its keyed rate limit; claims hold such a queue back as a
-- limited one ("limited OR key_rate IS NOT NULL"; "limited" itself stays as it is).
ALTER TABLE queues ADD COLUMN flow TEXT;
ALTER TABLE queues ADD COLUMN key_rate REAL;
ALTER TABLE queues ADD COLUMN key_burst INTEGER;

-- Per-key token buckets (a row only while not full; times in microseconds).
CREATE TABLE flow_buckets (
    tenant_id  TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    tokens     REAL    NOT NULL,
    tokens_at  INTEGER NOT NULL,
    full_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, queue, key)
) STRICT;

-- Uniqueness windows, debounces and throttles per key (see the PostgreSQL migration); states
-- is a JSON list.
CREATE TABLE flow_ledger (
    tenant_id  TEXT NOT NULL,
    queue      TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('unique', 'debounce', 'throttle')),
    key        TEXT NOT NULL,
    task_id    TEXT,
    since      INTEGER,
    until      INTEGER,
    states     TEXT,
    PRIMARY KEY (tenant_id, queue, kind, key)
) STRICT;
CREATE INDEX flow_ledger_until ON flow_ledger (until);
