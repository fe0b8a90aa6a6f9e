-- Flow control (SPEC §7): queue limits that flow, and claims shared fairly across tenants;
-- mirrors the PostgreSQL migration.

-- A queue's token bucket: tokens left when last taken from, and when (microseconds).
-- NULL tokens = a full bucket (never taken from, or settings changed).
ALTER TABLE queues ADD COLUMN tokens REAL;
ALTER TABLE queues ADD COLUMN tokens_at INTEGER;
-- Claims skip the tasks of these queues and take them queue by queue.
ALTER TABLE queues ADD COLUMN limited INTEGER GENERATED ALWAYS AS (
    max_concurrency IS NOT NULL OR rate_limit_per_second IS NOT NULL
    OR max_concurrency_per_key IS NOT NULL) VIRTUAL;

-- Dispatcher: ready push tasks by tenant, then in claim order (see the PostgreSQL migration).
DROP INDEX tasks_ready_push;
CREATE INDEX tasks_ready_push ON tasks (tenant_id, priority DESC, due_at)
    WHERE status = 'ready' AND target_type <> 'worker';
