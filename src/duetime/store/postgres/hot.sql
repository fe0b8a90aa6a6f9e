-- The engine's single statements on tasks (plans in duetime/store/core/hot.py). Conventions as
-- in queries.sql; "now" is coalesce(:now::timestamptz, now()).

-- name: task_promote_due
WITH due AS (
    SELECT id FROM tasks
    WHERE status IN ('scheduled', 'retrying') AND due_at <= coalesce(:now::timestamptz, now())
    ORDER BY due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'ready',
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM due));

-- The promoter's isolation path (see duetime.store.isolation): the ids task_promote_due takes.
-- name: task_due_ids
SELECT id FROM tasks
WHERE status IN ('scheduled', 'retrying') AND due_at <= coalesce(:now::timestamptz, now())
ORDER BY due_at
LIMIT :limit;

-- name: task_promote
UPDATE tasks t SET
    status = 'ready',
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(:ids::uuid[])
  AND t.status IN ('scheduled', 'retrying') AND t.due_at <= coalesce(:now::timestamptz, now());

-- name: task_next_due_at
SELECT min(due_at) AS due_at FROM tasks WHERE status IN ('scheduled', 'retrying');

-- Only a live lease can be extended: once expired it belongs to the reaper. Each lease is found
-- by one probe of tasks_lease_id_idx and its task then by primary key: a plain
-- "lease_id = ANY(...)" may, under statistics taken when nothing ran, walk every running task.
-- name: task_heartbeat
WITH held AS MATERIALIZED (
    SELECT x.id, l.id AS lease_id
    FROM unnest((SELECT :lease_ids::uuid[])) AS l (id)  -- a generic plan (hot_batch.sql)
    CROSS JOIN LATERAL (
        SELECT id FROM tasks
        WHERE lease_id = l.id  -- running, by tasks_lease_is_running (migration 0021)
          AND lease_expires_at > coalesce(:now::timestamptz, now())
        ORDER BY lease_id LIMIT 1
    ) AS x
)
UPDATE tasks t SET
    lease_expires_at = coalesce(:now::timestamptz, now())
        + make_interval(secs => :extend_seconds::float8)
FROM held
-- Tasks by primary key only: no status or expiry test here (tasks_lease_is_running makes the
-- lease match mean "running"; expiry was tested in held, at the same "now", and a reaper that
-- ended the lease meanwhile changed lease_id). Either test here let plans made under stale
-- statistics walk the running tasks (tasks_lease_expiry_idx) and rescan held for each:
-- quadratic (tests/store/test_postgres_queue_plans.py).
WHERE t.id = ANY(ARRAY(SELECT id FROM held)) AND t.id = held.id AND t.lease_id = held.lease_id
RETURNING t.lease_id, t.lease_expires_at;

-- name: task_expired_leases
SELECT * FROM tasks
WHERE status = 'running' AND lease_expires_at <= coalesce(:now::timestamptz, now())
ORDER BY lease_expires_at
LIMIT :limit;
