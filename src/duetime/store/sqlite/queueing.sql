-- Queue settings, pull workers and the maintained task counts (plans in
-- duetime/store/core/queueing.py). Row triggers keep task_counts exact (migration 0004).

-- name: queue_put
INSERT INTO queues (tenant_id, name, rate_limit_per_second, burst, max_concurrency,
                    max_concurrency_per_key, paused, updated_at, flow, key_rate, key_burst)
VALUES (:tenant_id, :name, :rate_limit_per_second, :burst, :max_concurrency,
        :max_concurrency_per_key, :paused, :now, :flow, :key_rate, :key_burst)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    flow = excluded.flow,
    key_rate = excluded.key_rate,
    key_burst = excluded.key_burst,
    rate_limit_per_second = excluded.rate_limit_per_second,
    burst = excluded.burst,
    max_concurrency = excluded.max_concurrency,
    max_concurrency_per_key = excluded.max_concurrency_per_key,
    paused = excluded.paused,
    updated_at = excluded.updated_at,
    -- A new rate or burst starts from a full bucket.
    tokens = CASE WHEN queues.rate_limit_per_second IS excluded.rate_limit_per_second
                   AND queues.burst IS excluded.burst
                  THEN queues.tokens END
RETURNING *;

-- name: queue_get
SELECT * FROM queues WHERE tenant_id = :tenant_id AND name = :name;

-- name: queue_list
SELECT * FROM queues WHERE tenant_id = :tenant_id ORDER BY name;

-- queues only grows (sorted, at most 64 names). first_seen_at = :now tells a first sighting.
-- name: worker_seen
INSERT INTO workers (tenant_id, worker_id, queues, first_seen_at, last_seen_at)
VALUES (:tenant_id, :worker_id, :queues, :now, :now)
ON CONFLICT (tenant_id, worker_id) DO UPDATE SET
    last_seen_at = max(workers.last_seen_at, excluded.last_seen_at),
    queues = (
        SELECT json_group_array(value) FROM (
            SELECT value FROM json_each(workers.queues)
            UNION
            SELECT value FROM json_each(excluded.queues)
            ORDER BY value
            LIMIT 64))
RETURNING first_seen_at = :now AS inserted;

-- name: worker_prune
DELETE FROM workers
WHERE tenant_id = :tenant_id
  AND last_seen_at < :now - CAST(round(:retention_seconds * 1000000) AS INTEGER);

-- name: worker_list
SELECT w.tenant_id, w.worker_id, w.queues, w.first_seen_at, w.last_seen_at,
       coalesce(r.n, 0) AS leases
FROM workers AS w
LEFT JOIN (
    SELECT worker_id, count(*) AS n FROM tasks
    WHERE tenant_id = :tenant_id AND status = 'running' AND target_type = 'worker'
    GROUP BY worker_id
) AS r ON r.worker_id = w.worker_id
WHERE w.tenant_id = :tenant_id
  AND w.last_seen_at >= :now - CAST(round(:live_within_seconds * 1000000) AS INTEGER)
ORDER BY w.worker_id;

-- name: counts_all
SELECT tenant_id, queue, status, n FROM task_counts WHERE n > 0
ORDER BY tenant_id, queue, status;

-- Counts above zero, then the lag of each queue's oldest ready task (reads only the tenant's
-- ready tasks).
-- name: queue_stats
SELECT queue, status, n, NULL AS lag FROM task_counts
WHERE tenant_id = :tenant_id AND (:queue IS NULL OR queue = :queue) AND n > 0
UNION ALL
SELECT queue, NULL, NULL, (:now - min(due_at)) / 1000000.0 FROM tasks
WHERE tenant_id = :tenant_id AND status = 'ready' AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- The triggers write the totals directly: no delta is ever pending, none of :limit is folded.
-- name: counts_fold
SELECT 0 * :limit;

-- name: counts_drop_zeros
DELETE FROM task_counts WHERE n = 0;

-- The (tenant, queue) after (:tenant_id, :queue) in key order among counted and configured
-- queues; the first one when :tenant_id is NULL.
-- name: counts_next_key
SELECT tenant_id, queue FROM (
    SELECT tenant_id, queue FROM task_counts
    UNION
    SELECT tenant_id, name AS queue FROM queues
)
WHERE :tenant_id IS NULL OR (tenant_id, queue) > (:tenant_id, :queue)
ORDER BY tenant_id, queue
LIMIT 1;

-- SQLite has no statement timeout: :max_rows alone bounds a recount.
-- name: counts_recount_budget
SELECT 1;

-- One queue's real count by status (reading at most :max_rows + 1 tasks) beside its counters.
-- Negative counters (a drift) are compared too.
-- name: counts_recount
SELECT status, sum(real) AS real, sum(counted) AS counted FROM (
    SELECT status, count(*) AS real, 0 AS counted
    FROM (SELECT status FROM tasks WHERE tenant_id = :tenant_id AND queue = :queue
          LIMIT :max_rows + 1)
    GROUP BY status
    UNION ALL
    SELECT status, 0, n FROM task_counts
    WHERE tenant_id = :tenant_id AND queue = :queue AND n <> 0
)
GROUP BY status
ORDER BY status;

-- :deltas is a JSON object, status → what to add.
-- name: counts_correct
INSERT INTO task_counts (tenant_id, queue, status, n)
SELECT :tenant_id, :queue, key, value FROM json_each(:deltas) WHERE true
ON CONFLICT (tenant_id, queue, status) DO UPDATE SET n = n + excluded.n;
