-- Named queries of the SQLite store for queues, pull workers and the lease API, loaded by
-- duetime.store.sqlite.queues. Conventions as in queries.sql (":now" in microseconds, lists as
-- one JSON text parameter).

-- name: queue_put
INSERT INTO queues (tenant_id, name, rate_limit_per_second, burst, max_concurrency,
                    max_concurrency_per_key, paused, updated_at)
VALUES (:tenant_id, :name, :rate_limit_per_second, :burst, :max_concurrency,
        :max_concurrency_per_key, :paused, :now)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    rate_limit_per_second = excluded.rate_limit_per_second,
    burst = excluded.burst,
    max_concurrency = excluded.max_concurrency,
    max_concurrency_per_key = excluded.max_concurrency_per_key,
    paused = excluded.paused,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_get
SELECT * FROM queues WHERE tenant_id = :tenant_id AND name = :name;

-- name: queue_list
SELECT * FROM queues WHERE tenant_id = :tenant_id ORDER BY name;

-- A lease is current while its task runs under it; via tasks_lease.
-- name: task_leases_get
SELECT * FROM tasks
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

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
RETURNING first_seen_at;

-- name: worker_prune
DELETE FROM workers WHERE tenant_id = :tenant_id AND last_seen_at < :before;

-- name: worker_list
SELECT w.worker_id, w.queues, w.first_seen_at, w.last_seen_at, coalesce(r.n, 0) AS leases
FROM workers AS w
LEFT JOIN (
    SELECT worker_id, count(*) AS n FROM tasks
    WHERE tenant_id = :tenant_id AND status = 'running' AND target_type = 'worker'
    GROUP BY worker_id
) AS r ON r.worker_id = w.worker_id
WHERE w.tenant_id = :tenant_id AND w.last_seen_at >= :since
ORDER BY w.worker_id;
