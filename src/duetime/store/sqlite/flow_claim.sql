-- The keyed rate limit's claim on SQLite (duetime/store/sqlite/flow.py, the rules of
-- duetime/store/core/keyed.py): one probe per key with ready work, in the claim's write
-- transaction. The picked rows are leased by hot_batch.sql's task_claim_rowids.

-- The first key with ready work of the claim's kinds (from the first key), and its first task
-- in claim order: one probe of tasks_ready_flow.
-- name: flow_key_first
SELECT flow_key AS key, priority, due_at, rowid, created_at, id FROM tasks
WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id AND queue = :queue
  AND flow_key >= ''
  AND (:upto IS NULL OR flow_key <= :upto)
  AND target_type IN (SELECT value FROM json_each(:types))
  AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
ORDER BY flow_key, priority DESC, due_at
LIMIT 1;

-- The same after key :after.
-- name: flow_key_next
SELECT flow_key AS key, priority, due_at, rowid, created_at, id FROM tasks
WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id AND queue = :queue
  AND flow_key > :after
  AND (:upto IS NULL OR flow_key <= :upto)
  AND target_type IN (SELECT value FROM json_each(:types))
  AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
ORDER BY flow_key, priority DESC, due_at
LIMIT 1;

-- name: flow_bucket_get
SELECT tokens, tokens_at FROM flow_buckets
WHERE tenant_id = :tenant_id AND queue = :queue AND key = :key;

-- name: flow_key_running
SELECT count(*) FROM tasks
WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue
  AND concurrency_key = :key;

-- A key's first :n ready tasks of the claim's kinds, in claim order.
-- name: flow_key_pick
SELECT rowid, priority, due_at, created_at, id FROM tasks
WHERE status = 'ready' AND flow_key IS NOT NULL AND flow_key = :key
  AND tenant_id = :tenant_id AND queue = :queue
  AND target_type IN (SELECT value FROM json_each(:types))
  AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
ORDER BY priority DESC, due_at, created_at, id
LIMIT :n;

-- name: flow_bucket_put
INSERT INTO flow_buckets (tenant_id, queue, key, tokens, tokens_at, full_at)
VALUES (:tenant_id, :queue, :key, :tokens, :now, :full_at)
ON CONFLICT (tenant_id, queue, key) DO UPDATE SET
    tokens = excluded.tokens,
    tokens_at = max(flow_buckets.tokens_at, excluded.tokens_at),
    full_at = excluded.full_at;

-- A keyed queue with ready work its flow index does not list: those tasks get '' (see
-- flow.sql's flow_keys_fill).
-- name: flow_keys_fill_queue
UPDATE tasks SET flow_key = ''
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue AND flow_key IS NULL
    LIMIT :limit);
