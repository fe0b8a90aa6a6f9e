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

-- name: queue_limited_all
-- Every queue whose claims go through the locked path (see queue_lock); cached by each store.
SELECT tenant_id, name FROM queues WHERE max_concurrency IS NOT NULL AND NOT paused;

-- name: queue_limited_ready_worker
-- Of the limited queues $1 (tenants) / $2 (names), pairwise, those with a ready worker task the
-- claim could take ($3 target types, $4 names or NULL): one LIMIT 1 probe per queue, in the
-- partial index's own order (a generic plan would otherwise turn an EXISTS into a scan of
-- every ready task).
SELECT q.tenant_id, q.name
FROM unnest($1::text[], $2::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type = 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND 'worker' = ANY($3::text[])
      AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
    ORDER BY t.priority DESC, t.due_at  -- the index's order: stop at the first hit
    LIMIT 1
) AS found;

-- name: queue_limited_ready_push
-- tasks_ready_push_idx holds only the ready push tasks the dispatcher has not taken: mostly
-- those of paused and limited queues.
SELECT q.tenant_id, q.name
FROM unnest($1::text[], $2::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type <> 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND t.target_type = ANY($3::text[])
      AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
    ORDER BY t.priority DESC, t.due_at  -- the index's order: stop at the first hit
    LIMIT 1
) AS found;

-- name: queue_limited_ready
-- Any mix of target types: both probes above (each on its own partial index), merged.
SELECT q.tenant_id, q.name
FROM unnest($1::text[], $2::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type = 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND 'worker' = ANY($3::text[])
      AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
    ORDER BY t.priority DESC, t.due_at
    LIMIT 1
) AS found
UNION
SELECT q.tenant_id, q.name
FROM unnest($1::text[], $2::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type <> 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND t.target_type = ANY($3::text[])
      AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
    ORDER BY t.priority DESC, t.due_at
    LIMIT 1
) AS found;

-- name: queue_lock
-- Serializes the claims of one limited queue: held until the claim's transaction commits, so the
-- next claimer's count of running tasks (a later statement, a fresh snapshot) includes ours.
SELECT max_concurrency FROM queues
WHERE tenant_id = $1 AND name = $2 AND max_concurrency IS NOT NULL AND NOT paused
FOR UPDATE;

-- name: task_claim_limited_worker
-- Lease API on a limited queue: worker tasks of tenant $9's queue $3, at most $10 running.
-- Other parameters as in task_claim_push. Run after queue_lock, in its transaction.
WITH room AS (
    SELECT greatest(0, least($5::int, $10::int - (
        SELECT count(*) FROM tasks
        WHERE tenant_id = $9 AND status = 'running' AND queue = $3)))::int AS n
),
picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = $9 AND queue = $3
      AND 'worker' = ANY($2::text[])
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

-- name: task_claim_limited_push
-- Push targets of a limited queue (the dispatcher's locked path), via tasks_ready_push_idx.
-- Parameters as above.
WITH room AS (
    SELECT greatest(0, least($5::int, $10::int - (
        SELECT count(*) FROM tasks
        WHERE tenant_id = $9 AND status = 'running' AND queue = $3)))::int AS n
),
picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type <> 'worker' AND tenant_id = $9 AND queue = $3
      AND target_type = ANY($2::text[])
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

-- name: task_claim_limited
-- Any mix of target types on a limited queue. Parameters as above.
WITH room AS (
    SELECT greatest(0, least($5::int, $10::int - (
        SELECT count(*) FROM tasks
        WHERE tenant_id = $9 AND status = 'running' AND queue = $3)))::int AS n
),
picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND tenant_id = $9 AND queue = $3
      AND target_type = ANY($2::text[])
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

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
