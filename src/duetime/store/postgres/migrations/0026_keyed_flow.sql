-- Keyed flow control (SPEC §7 "Keyed flow control", docs/flow-control.md): keyed rate limits,
-- uniqueness windows, debounce and throttle.

-- A task's key under its queue's keyed rate limit, evaluated once at create
-- (duetime.flow.keys): NULL when the queue had no keyed rate limit then, '' when the task has
-- no value for the key (it follows the queue's own limits). A debounce's absorbed creates.
ALTER TABLE tasks
    ADD COLUMN flow_key text,
    ADD COLUMN absorbed integer NOT NULL DEFAULT 0,
    ADD COLUMN absorbed_at timestamptz;
ALTER TYPE task_input ADD ATTRIBUTE flow_key text;

-- Ready tasks with a flow key, by (tenant, queue, key) in each key's claim order: the keyed
-- rate limit's claim lists a queue's keys with ready work (a skip scan, one probe per key) and
-- takes each key's first tasks (one probe). Partial: tasks of other queues never enter it.
CREATE INDEX tasks_ready_flow_idx
    ON tasks (tenant_id, queue, flow_key, priority DESC, due_at, created_at, id)
    WHERE status = 'ready' AND flow_key IS NOT NULL;

-- A queue's flow rules as the API states them (duetime.flow.rules), and its keyed rate limit
-- as the claim reads it. Claims hold a queue with a keyed rate limit back as they hold a
-- limited one ("limited OR key_rate IS NOT NULL"): it is claimed on the locked path, queue by
-- queue. (The generated "limited" column stays as it is: the upgrade rule keeps columns.)
ALTER TABLE queues
    ADD COLUMN flow jsonb,
    ADD COLUMN key_rate double precision,
    ADD COLUMN key_burst integer;

-- Per-key token buckets of keyed rate limits: a row only while the key's bucket is not full
-- (no row = full), written by the claims that take from it and swept once full_at has passed.
-- Soft state, so UNLOGGED: a claim's write costs no WAL (after a crash, or on a promoted
-- standby, every bucket starts full: at most one burst per key more). Not indexed beyond its
-- key, with room on its pages, so a claim's upsert stays a HOT update.
CREATE UNLOGGED TABLE flow_buckets (
    tenant_id  text NOT NULL,
    queue      text NOT NULL,
    key        text NOT NULL,
    tokens     double precision NOT NULL,
    tokens_at  timestamptz NOT NULL,
    full_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, queue, key)
) WITH (fillfactor = 50);

-- What creates of one key left for the next: a uniqueness window (its task, until the period
-- ends, the statuses it holds in), a debounce (its waiting task, since the burst began, until
-- max_wait), a throttle (until = the key's theoretical arrival time). The primary key makes
-- concurrent creates of one key wait for each other, on every node. It outlives the tasks
-- (retention) and is swept once "until" has passed.
CREATE TABLE flow_ledger (
    tenant_id  text NOT NULL,
    queue      text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('unique', 'debounce', 'throttle')),
    key        text NOT NULL,
    task_id    uuid,
    since      timestamptz,
    until      timestamptz,
    states     text[],
    PRIMARY KEY (tenant_id, queue, kind, key)
);
CREATE INDEX flow_ledger_until_idx ON flow_ledger (until);
