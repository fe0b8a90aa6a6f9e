-- Named queries of the PostgreSQL store for queues, pull workers and the lease API, loaded by
-- duetime.store.postgres.queues. Conventions as in queries.sql: $1 is the pinned test time
-- wherever "now" matters, read as coalesce($1::timestamptz, now()).

-- name: queue_put
INSERT INTO queues AS q (tenant_id, name, rate_limit_per_second, burst, max_concurrency,
                         max_concurrency_per_key, paused, updated_at)
VALUES ($2, $3, $4, $5, $6, $7, $8, coalesce($1::timestamptz, now()))
ON CONFLICT (tenant_id, name) DO UPDATE SET
    rate_limit_per_second = excluded.rate_limit_per_second,
    burst = excluded.burst,
    max_concurrency = excluded.max_concurrency,
    max_concurrency_per_key = excluded.max_concurrency_per_key,
    paused = excluded.paused,
    updated_at = excluded.updated_at
RETURNING q.*;

-- name: queue_get
SELECT * FROM queues WHERE tenant_id = $1 AND name = $2;

-- name: queue_list
SELECT * FROM queues WHERE tenant_id = $1 ORDER BY name;

-- name: task_leases_get
-- A lease is current while its task runs under it (tasks_lease_is_running). One probe of
-- tasks_lease_id_idx per lease id: a plain "lease_id = ANY($1)" may, under statistics taken
-- when nothing ran, walk tasks_lease_expiry_idx (every running task) instead.
SELECT t.*
FROM unnest($1::uuid[]) AS l (id)
CROSS JOIN LATERAL (
    SELECT * FROM tasks
    WHERE lease_id = l.id AND status = 'running'
      AND ($2::text IS NULL OR tenant_id = $2)
    ORDER BY lease_id
    LIMIT 1
) AS t;

-- name: worker_seen
-- queues only grows (sorted, at most 64 names); "inserted" tells a first sighting.
INSERT INTO workers AS w (tenant_id, worker_id, queues, first_seen_at, last_seen_at)
VALUES ($2, $3, $4::text[], coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT (tenant_id, worker_id) DO UPDATE SET
    last_seen_at = greatest(w.last_seen_at, excluded.last_seen_at),
    queues = CASE
        WHEN excluded.queues <@ w.queues THEN w.queues
        ELSE (ARRAY(SELECT DISTINCT q FROM unnest(w.queues || excluded.queues) AS q ORDER BY q))[1:64]
    END
RETURNING (xmax = 0) AS inserted;

-- name: worker_prune
-- Forget the tenant's workers not seen for $3 seconds (run when a new worker shows up).
DELETE FROM workers
WHERE tenant_id = $2 AND last_seen_at < coalesce($1::timestamptz, now()) - make_interval(secs => $3);

-- name: worker_list
SELECT w.worker_id, w.queues, w.first_seen_at, w.last_seen_at, coalesce(r.n, 0) AS leases
FROM workers w
LEFT JOIN (
    SELECT worker_id, count(*) AS n FROM tasks
    WHERE tenant_id = $2 AND status = 'running' AND target_type = 'worker'
    GROUP BY worker_id
) r ON r.worker_id = w.worker_id
WHERE w.tenant_id = $2
  AND w.last_seen_at >= coalesce($1::timestamptz, now()) - make_interval(secs => $3)
ORDER BY w.worker_id;
