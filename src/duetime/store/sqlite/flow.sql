-- Keyed flow control (plans in duetime/store/core/flow.py); mirrors PostgreSQL's flow.sql.
-- One writer: a ledger row needs no lock, but the statements are the same shape.

-- name: flow_task_by_idempotency_key
SELECT * FROM tasks WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: flow_ledger_hold
INSERT INTO flow_ledger (tenant_id, queue, kind, key)
VALUES (:tenant_id, :queue, :kind, :key)
ON CONFLICT (tenant_id, queue, kind, key) DO UPDATE SET until = flow_ledger.until
RETURNING task_id, since, until, states;

-- name: flow_ledger_put
UPDATE flow_ledger SET task_id = :task_id, since = :since, until = :until, states = :states
WHERE tenant_id = :tenant_id AND queue = :queue AND kind = :kind AND key = :key;

-- name: flow_ledger_repoint
UPDATE flow_ledger SET task_id = :task_id
WHERE tenant_id = :tenant_id AND queue = :queue AND kind = :kind AND key = :key;

-- name: task_absorb
UPDATE tasks SET
    payload = :payload_json,
    payload_ref = :payload_ref,
    run_at = :run_at,
    due_at = :run_at,
    absorbed = absorbed + 1,
    absorbed_at = :now,
    version = version + 1,
    updated_at = :now
WHERE id = :id AND tenant_id = :tenant_id AND status = 'scheduled'
RETURNING *;

-- name: flow_buckets_reset
DELETE FROM flow_buckets WHERE tenant_id = :tenant_id AND queue = :queue;

-- name: flow_buckets_get
SELECT key, tokens, tokens_at FROM flow_buckets
WHERE tenant_id = :tenant_id AND queue = :queue AND key IN (SELECT value FROM json_each(:keys));

-- name: flow_ledger_sweep
DELETE FROM flow_ledger WHERE rowid IN (
    SELECT rowid FROM flow_ledger WHERE until < :now LIMIT :limit);

-- name: flow_buckets_sweep
DELETE FROM flow_buckets WHERE rowid IN (
    SELECT rowid FROM flow_buckets WHERE full_at <= :now LIMIT :limit);

-- name: flow_keys_fill
UPDATE tasks SET flow_key = ''
WHERE rowid IN (
    SELECT t.rowid FROM queues AS q
    JOIN tasks AS t ON t.tenant_id = q.tenant_id AND t.queue = q.name
    WHERE q.key_rate IS NOT NULL AND t.status = 'ready' AND t.flow_key IS NULL
    LIMIT :limit);

-- The end of queue_keys_by_flow and queue_keys_by_concurrency, after their "ready" and
-- "running" counts per key: every key with both counts, the keys asked for first, then busiest.
-- fragment: keys_by_count
), wanted AS (
    SELECT value AS key FROM json_each(:keys)
)
SELECT k.key, coalesce(r.n, 0) AS ready, coalesce(u.n, 0) AS running
FROM (SELECT key FROM ready UNION SELECT key FROM running UNION SELECT key FROM wanted) AS k
LEFT JOIN ready AS r ON r.key = k.key
LEFT JOIN running AS u ON u.key = k.key
ORDER BY k.key IN (SELECT key FROM wanted) DESC, coalesce(r.n, 0) DESC, coalesce(u.n, 0) DESC,
         k.key
LIMIT :limit + (SELECT count(*) FROM wanted);

-- name: queue_keys_by_flow
WITH ready AS (
    SELECT flow_key AS key, count(*) AS n FROM (
        SELECT flow_key FROM tasks
        WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id
          AND queue = :queue
        LIMIT :read)
    GROUP BY flow_key
), running AS (
    SELECT flow_key AS key, count(*) AS n FROM tasks
    WHERE status = 'running' AND tenant_id = :tenant_id AND queue = :queue
      AND flow_key IS NOT NULL
    GROUP BY flow_key
-- include: keys_by_count

-- name: queue_keys_by_concurrency
WITH ready AS (
    SELECT concurrency_key AS key, count(*) AS n FROM (
        SELECT concurrency_key FROM tasks
        WHERE status = 'ready' AND concurrency_key IS NOT NULL AND tenant_id = :tenant_id
          AND queue = :queue
        LIMIT :read)
    GROUP BY concurrency_key
), running AS (
    SELECT concurrency_key AS key, count(*) AS n FROM tasks
    WHERE status = 'running' AND tenant_id = :tenant_id AND queue = :queue
      AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
-- include: keys_by_count
