-- Flow control (SPEC §7): queue limits that flow, and claims shared fairly across tenants.

-- A queue's token bucket (rate_limit_per_second with burst): the tokens left when it was last
-- taken from, and when. NULL tokens = a full bucket (never taken from, or settings changed).
ALTER TABLE queues
    ADD COLUMN tokens double precision,
    ADD COLUMN tokens_at timestamptz,
    -- Claims skip the tasks of these queues and take them on the locked path, queue by queue.
    ADD COLUMN limited boolean GENERATED ALWAYS AS (
        max_concurrency IS NOT NULL OR rate_limit_per_second IS NOT NULL
        OR max_concurrency_per_key IS NOT NULL) STORED;

-- Dispatcher: ready push tasks by tenant, then in claim order. The push claim walks the tenants
-- with ready work (a skip scan of this index's first column) and takes each one's share in its
-- own order. Replaces the index of 0001 (same predicate, same readers plus the tenant), so
-- transitions pay for no extra index.
DROP INDEX tasks_ready_push_idx;
CREATE INDEX tasks_ready_push_idx ON tasks (tenant_id, priority DESC, due_at)
    WHERE status = 'ready' AND target_type <> 'worker';
