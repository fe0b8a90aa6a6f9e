-- Named queries of the SQLite store for the maintained task counts (migration 0004), loaded by
-- duetime.store.sqlite.counters. Row triggers keep task_counts exact; rows at 0 are skipped.

-- name: counts_all
SELECT tenant_id, queue, status, n FROM task_counts WHERE n > 0
ORDER BY tenant_id, queue, status;

-- name: counts_of_tenant
-- Negative counts (a drift) are kept for the reconcile round.
SELECT queue, status, n FROM task_counts
WHERE tenant_id = :tenant_id AND (:queue IS NULL OR queue = :queue) AND n <> 0;

-- name: oldest_ready
-- The earliest due_at of each queue's ready tasks: reads only the tenant's ready tasks.
SELECT queue, min(due_at) AS oldest FROM tasks
WHERE tenant_id = :tenant_id AND status = 'ready' AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- name: counts_drop_zeros
DELETE FROM task_counts WHERE n = 0;

-- name: counts_next_key
-- The (tenant, queue) after (:tenant_id, :queue) in key order among counted and configured
-- queues; the first one when :tenant_id is NULL.
SELECT tenant_id, queue FROM (
    SELECT tenant_id, queue FROM task_counts
    UNION
    SELECT tenant_id, name AS queue FROM queues
)
WHERE :tenant_id IS NULL OR (tenant_id, queue) > (:tenant_id, :queue)
ORDER BY tenant_id, queue
LIMIT 1;

-- name: counts_real
-- The real count of one queue by status, reading at most :max_rows + 1 tasks.
SELECT status, count(*) AS n
FROM (SELECT status FROM tasks WHERE tenant_id = :tenant_id AND queue = :queue
      LIMIT :max_rows + 1)
GROUP BY status;

-- name: counts_correct
INSERT INTO task_counts (tenant_id, queue, status, n)
VALUES (:tenant_id, :queue, :status, :delta)
ON CONFLICT (tenant_id, queue, status) DO UPDATE SET n = n + excluded.n;
