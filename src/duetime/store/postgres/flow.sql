-- Keyed flow control (plans in duetime/store/core/flow.py): the ledger of uniqueness windows,
-- debounces and throttles, the sweep, and the figures of a queue's keys.

-- name: flow_task_by_idempotency_key
SELECT * FROM tasks WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- The key's row, made empty when absent, and locked either way until the create commits: a
-- concurrent create of the same key (on any node) waits here, then reads what this one left.
-- name: flow_ledger_hold
INSERT INTO flow_ledger AS l (tenant_id, queue, kind, key)
VALUES (:tenant_id, :queue, :kind, :key)
ON CONFLICT (tenant_id, queue, kind, key) DO UPDATE SET until = l.until
RETURNING l.task_id, l.since, l.until, l.states;

-- name: flow_ledger_put
UPDATE flow_ledger SET
    task_id = :task_id::uuid,
    since = :since::timestamptz,
    until = :until::timestamptz,
    states = :states::text[]
WHERE tenant_id = :tenant_id AND queue = :queue AND kind = :kind AND key = :key;

-- name: flow_ledger_repoint
UPDATE flow_ledger SET task_id = :task_id::uuid
WHERE tenant_id = :tenant_id AND queue = :queue AND kind = :kind AND key = :key;

-- A debounce absorbs a create: the latest payload, a later due time, one more absorbed. Only
-- while the task still waits to be promoted: once due it runs with what it has.
-- name: task_absorb
UPDATE tasks t SET
    payload = :payload_json,
    payload_ref = :payload_ref,
    run_at = :run_at::timestamptz,
    due_at = :run_at::timestamptz,
    absorbed = t.absorbed + 1,
    absorbed_at = coalesce(:now::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = :id::uuid AND t.tenant_id = :tenant_id AND t.status = 'scheduled'
RETURNING t.*;

-- A new keyed rate or burst: every key's bucket starts full.
-- name: flow_buckets_reset
DELETE FROM flow_buckets WHERE tenant_id = :tenant_id AND queue = :queue;

-- name: flow_buckets_get
SELECT key, tokens, tokens_at FROM flow_buckets
WHERE tenant_id = :tenant_id AND queue = :queue AND key = ANY(:keys::text[]);

-- name: flow_ledger_sweep
DELETE FROM flow_ledger WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM flow_ledger WHERE until < coalesce(:now::timestamptz, now()) LIMIT :limit));

-- name: flow_buckets_sweep
DELETE FROM flow_buckets WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM flow_buckets WHERE full_at <= coalesce(:now::timestamptz, now())
    LIMIT :limit));

-- Ready tasks of queues with a keyed rate limit that have no flow key get '' (no value: the
-- queue's own limits), so the keyed claim, which reads only the flow index, sees them. Walks
-- those queues' ready tasks by the ready indexes (one per target kind).
-- name: flow_keys_fill
UPDATE tasks t SET flow_key = ''
WHERE t.id = ANY(ARRAY(
    SELECT x.id FROM queues q
    CROSS JOIN LATERAL (
        (SELECT id FROM tasks
         WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = q.tenant_id
           AND queue = q.name AND flow_key IS NULL
         LIMIT :limit)
        UNION ALL
        (SELECT id FROM tasks
         WHERE status = 'ready' AND target_type <> 'worker' AND tenant_id = q.tenant_id
           AND queue = q.name AND flow_key IS NULL
         LIMIT :limit)
    ) AS x
    WHERE q.key_rate IS NOT NULL
    LIMIT :limit))
  AND t.status = 'ready' AND t.flow_key IS NULL;

-- The end of queue_keys_by_flow and queue_keys_by_concurrency, after their "ready" and
-- "running" counts per key: every key with both counts, the keys asked for first, then busiest.
-- fragment: keys_by_count
), wanted AS (
    SELECT unnest(:keys::text[]) AS key
)
SELECT k.key, coalesce(r.n, 0) AS ready, coalesce(u.n, 0) AS running
FROM (SELECT key FROM ready UNION SELECT key FROM running UNION SELECT key FROM wanted) AS k
LEFT JOIN ready AS r ON r.key = k.key
LEFT JOIN running AS u ON u.key = k.key
ORDER BY k.key = ANY(:keys::text[]) DESC, coalesce(r.n, 0) DESC, coalesce(u.n, 0) DESC, k.key
LIMIT :limit::int + cardinality(:keys::text[]);

-- The keys of a queue with a keyed rate limit: ready tasks per key among the first :read ready
-- tasks (tasks_ready_flow_idx), running ones per key (tasks_running_queue_idx), busiest first,
-- and the keys asked for (:keys) whatever they hold.
-- name: queue_keys_by_flow
WITH ready AS (
    SELECT flow_key AS key, count(*)::int AS n FROM (
        SELECT flow_key FROM tasks
        WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id
          AND queue = :queue
        LIMIT :read) AS r
    GROUP BY flow_key
), running AS (
    SELECT flow_key AS key, count(*)::int AS n FROM tasks
    WHERE status = 'running' AND tenant_id = :tenant_id AND queue = :queue
      AND flow_key IS NOT NULL
    GROUP BY flow_key
-- include: keys_by_count

-- The same for a queue whose keyed limit is max_concurrency_per_key alone: concurrency keys.
-- name: queue_keys_by_concurrency
WITH ready AS (
    SELECT concurrency_key AS key, count(*)::int AS n FROM (
        SELECT concurrency_key FROM tasks
        WHERE status = 'ready' AND concurrency_key IS NOT NULL AND tenant_id = :tenant_id
          AND queue = :queue
        LIMIT :read) AS r
    GROUP BY concurrency_key
), running AS (
    SELECT concurrency_key AS key, count(*)::int AS n FROM tasks
    WHERE status = 'running' AND tenant_id = :tenant_id AND queue = :queue
      AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
-- include: keys_by_count
