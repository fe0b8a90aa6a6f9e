-- Queue settings, pull workers and the maintained task counts (plans in
-- duetime/store/core/queueing.py). Statement triggers append count deltas (migration 0004): a
-- figure is task_counts.n plus the deltas not yet folded into it.

-- name: queue_put
INSERT INTO queues AS q (tenant_id, name, rate_limit_per_second, burst, max_concurrency,
                         max_concurrency_per_key, paused, updated_at, flow, key_rate, key_burst)
VALUES (:tenant_id, :name, :rate_limit_per_second, :burst, :max_concurrency,
        :max_concurrency_per_key, :paused, coalesce(:now::timestamptz, now()),
        :flow::jsonb, :key_rate::float8, :key_burst::int)
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
    tokens = CASE WHEN q.rate_limit_per_second IS NOT DISTINCT FROM excluded.rate_limit_per_second
                   AND q.burst IS NOT DISTINCT FROM excluded.burst
                  THEN q.tokens END
RETURNING q.*;

-- name: queue_get
SELECT * FROM queues WHERE tenant_id = :tenant_id AND name = :name;

-- name: queue_list
SELECT * FROM queues WHERE tenant_id = :tenant_id ORDER BY name;

-- queues only grows (sorted, at most 64 names); "inserted" tells a first sighting.
-- name: worker_seen
INSERT INTO workers AS w (tenant_id, worker_id, queues, first_seen_at, last_seen_at)
VALUES (:tenant_id, :worker_id, :queues::text[], coalesce(:now::timestamptz, now()),
        coalesce(:now::timestamptz, now()))
ON CONFLICT (tenant_id, worker_id) DO UPDATE SET
    last_seen_at = greatest(w.last_seen_at, excluded.last_seen_at),
    queues = CASE
        WHEN excluded.queues <@ w.queues THEN w.queues
        ELSE (ARRAY(SELECT DISTINCT q FROM unnest(w.queues || excluded.queues) AS q ORDER BY q))[1:64]
    END
RETURNING (xmax = 0) AS inserted;

-- name: worker_prune
DELETE FROM workers
WHERE tenant_id = :tenant_id
  AND last_seen_at < coalesce(:now::timestamptz, now())
                     - make_interval(secs => :retention_seconds);

-- name: worker_list
SELECT w.tenant_id, w.worker_id, w.queues, w.first_seen_at, w.last_seen_at,
       coalesce(r.n, 0) AS leases
FROM workers w
LEFT JOIN (
    SELECT worker_id, count(*) AS n FROM tasks
    WHERE tenant_id = :tenant_id AND status = 'running' AND target_type = 'worker'
    GROUP BY worker_id
) r ON r.worker_id = w.worker_id
WHERE w.tenant_id = :tenant_id
  AND w.last_seen_at >= coalesce(:now::timestamptz, now())
                        - make_interval(secs => :live_within_seconds)
ORDER BY w.worker_id;

-- name: counts_all
SELECT tenant_id, queue, status, sum(n)::bigint AS n
FROM (SELECT tenant_id, queue, status, n FROM task_counts
      UNION ALL
      SELECT tenant_id, queue, status, delta FROM task_count_deltas) AS c
GROUP BY tenant_id, queue, status
HAVING sum(n) > 0
ORDER BY tenant_id, queue, status;

-- Counts above zero, then how late each queue's most overdue ready task is, on the store's
-- clock: one statement, one snapshot. Reads only the tenant's ready tasks
-- (tasks_tenant_status_idx), never its history.
-- name: queue_stats
SELECT queue, status, sum(n)::bigint AS n, NULL::float8 AS lag
FROM (SELECT queue, status, n FROM task_counts
      WHERE tenant_id = :tenant_id AND (:queue::text IS NULL OR queue = :queue)
      UNION ALL
      SELECT queue, status, delta FROM task_count_deltas
      WHERE tenant_id = :tenant_id AND (:queue::text IS NULL OR queue = :queue)) AS c
GROUP BY queue, status
HAVING sum(n) > 0
UNION ALL
SELECT queue, NULL, NULL,
       extract(epoch FROM coalesce(:now::timestamptz, now()) - min(due_at))::float8
FROM tasks
WHERE tenant_id = :tenant_id AND status = 'ready' AND (:queue::text IS NULL OR queue = :queue)
GROUP BY queue;

-- Move up to :limit deltas into the totals in one statement: readers see them either pending or
-- folded, never both. Only the leader folds; a row another fold took is skipped.
-- name: counts_fold
WITH moved AS (
    DELETE FROM task_count_deltas
    WHERE ctid IN (SELECT ctid FROM task_count_deltas LIMIT :limit)
    RETURNING tenant_id, queue, status, delta
), summed AS (
    SELECT tenant_id, queue, status, sum(delta) AS delta, count(*) AS rows
    FROM moved GROUP BY tenant_id, queue, status
), folded AS (
    INSERT INTO task_counts AS c (tenant_id, queue, status, n)
    SELECT tenant_id, queue, status, delta FROM summed
    ON CONFLICT (tenant_id, queue, status) DO UPDATE SET n = c.n + excluded.n
)
SELECT coalesce(sum(rows), 0)::bigint FROM summed;

-- name: counts_drop_zeros
DELETE FROM task_counts WHERE n = 0;

-- The (tenant, queue) after (:tenant_id, :queue) in byte order among counted and configured
-- queues; the first one when :tenant_id is NULL.
-- name: counts_next_key
SELECT tenant_id, queue FROM (
    SELECT tenant_id, queue FROM task_counts
    UNION
    SELECT tenant_id, queue FROM task_count_deltas
    UNION
    SELECT tenant_id, name FROM queues
) AS k
WHERE :tenant_id::text IS NULL
   OR tenant_id COLLATE "C" > :tenant_id
   OR (tenant_id = :tenant_id AND queue COLLATE "C" > :queue::text)
ORDER BY tenant_id COLLATE "C", queue COLLATE "C"
LIMIT 1;

-- A recount walks the tenant's tasks (no index leads with the queue): bounded in time as well
-- (the store turns a cancelled recount into a skipped round).
-- name: counts_recount_budget
SET LOCAL statement_timeout = '5s';

-- One queue's real count by status (reading at most :max_rows + 1 tasks) beside its counters,
-- from one snapshot. Negative counters (a drift) are compared too.
-- name: counts_recount
SELECT status, sum(real)::bigint AS real, sum(counted)::bigint AS counted
FROM (
    SELECT status, count(*) AS real, 0 AS counted
    FROM (SELECT status FROM tasks WHERE tenant_id = :tenant_id AND queue = :queue
          LIMIT :max_rows + 1) AS t
    GROUP BY status
    UNION ALL
    SELECT status, 0, n FROM task_counts WHERE tenant_id = :tenant_id AND queue = :queue
    UNION ALL
    SELECT status, 0, delta FROM task_count_deltas WHERE tenant_id = :tenant_id AND queue = :queue
) AS c
GROUP BY status
ORDER BY status;

-- :deltas is a JSON object, status → what to add (appended as deltas: a correction commutes
-- with whatever commits meanwhile).
-- name: counts_correct
INSERT INTO task_count_deltas (tenant_id, queue, status, delta)
SELECT :tenant_id, :queue, key, value::bigint FROM jsonb_each_text(:deltas::jsonb);
