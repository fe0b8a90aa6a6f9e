-- Named queries of the PostgreSQL store for the maintained task counts (migration 0004),
-- loaded by duetime.store.postgres.counters. A figure is task_counts.n plus the deltas not yet
-- folded into it.

-- name: counts_all
SELECT tenant_id, queue, status, sum(n)::bigint AS n
FROM (SELECT tenant_id, queue, status, n FROM task_counts
      UNION ALL
      SELECT tenant_id, queue, status, delta FROM task_count_deltas) AS c
GROUP BY tenant_id, queue, status
HAVING sum(n) > 0
ORDER BY tenant_id, queue, status;

-- name: counts_of_tenant
-- $2 NULL = every queue of the tenant. Negative sums (a drift) are kept for the reconcile round.
SELECT queue, status, sum(n)::bigint AS n
FROM (SELECT queue, status, n FROM task_counts
      WHERE tenant_id = $1 AND ($2::text IS NULL OR queue = $2)
      UNION ALL
      SELECT queue, status, delta FROM task_count_deltas
      WHERE tenant_id = $1 AND ($2::text IS NULL OR queue = $2)) AS c
GROUP BY queue, status
HAVING sum(n) <> 0;

-- name: oldest_ready
-- How late each queue's most overdue ready task is, on the store's clock ($1 pinned time). Reads
-- only the tenant's ready tasks (tasks_tenant_status_idx), never its history.
SELECT queue,
       extract(epoch FROM coalesce($1::timestamptz, now()) - min(due_at))::float8 AS lag
FROM tasks
WHERE tenant_id = $2 AND status = 'ready' AND ($3::text IS NULL OR queue = $3)
GROUP BY queue;

-- name: counts_fold
-- Move up to $1 deltas into the totals in one statement: readers see them either pending or
-- folded, never both. Only the leader folds; a row another fold took is skipped.
WITH moved AS (
    DELETE FROM task_count_deltas
    WHERE ctid IN (SELECT ctid FROM task_count_deltas LIMIT $1)
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

-- name: counts_next_key
-- The (tenant, queue) after ($1, $2) in byte order among counted and configured queues; the
-- first one when $1 is NULL.
SELECT tenant_id, queue FROM (
    SELECT tenant_id, queue FROM task_counts
    UNION
    SELECT tenant_id, queue FROM task_count_deltas
    UNION
    SELECT tenant_id, name FROM queues
) AS k
WHERE $1::text IS NULL
   OR tenant_id COLLATE "C" > $1
   OR (tenant_id = $1 AND queue COLLATE "C" > $2::text)
ORDER BY tenant_id COLLATE "C", queue COLLATE "C"
LIMIT 1;

-- name: counts_recount_timeout
-- A recount walks the tenant's tasks (no index leads with the queue): bounded in time as well.
SET LOCAL statement_timeout = '5s';

-- name: counts_real
-- The real count of one queue by status, reading at most $3 + 1 tasks (the caller skips a
-- queue that has more).
SELECT status, count(*)::bigint AS n
FROM (SELECT status FROM tasks WHERE tenant_id = $1 AND queue = $2 LIMIT $3 + 1) AS t
GROUP BY status;

-- name: counts_correct
INSERT INTO task_count_deltas (tenant_id, queue, status, delta)
SELECT $1, $2, status, delta FROM unnest($3::text[], $4::bigint[]) AS c (status, delta);
