-- Named queries of the PostgreSQL store for claims on limited queues and the lease API, loaded by
-- duetime.store.postgres.queues. Conventions as in queries.sql: $1 is the pinned test time
-- wherever "now" matters, read as coalesce($1::timestamptz, now()).

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
