-- Named queries of the PostgreSQL store, loaded into a dict by duetime.store.postgres.sql.
--
-- Conventions:
--   * Statements are prepared and soon run with generic plans, blind to array sizes: rows are
--     found with "id = ANY(array)" (an index scan at any table size), never by joining a CTE or
--     unnest() to tasks, which a generic plan may turn into a hash join over a sequential scan.
--   * $1 is the pinned test time in every query that needs "now": every due/lease decision reads
--     coalesce($1::timestamptz, now()) so production trusts the database clock and tests pin it.
--   * Every state change is one UPDATE conditional on status (and lease_id for running tasks).
--   * No statement sends NOTIFY: a NOTIFY in a transaction holds a cluster-wide lock through
--     its commit, which serialized concurrent single creates (measured: 2-4x fewer per second).
--     The store wakes other nodes after commit instead, with one coalesced pg_notify
--     (see duetime.store.postgres.signals).

-- name: ping
SELECT 1;

-- name: now
SELECT coalesce($1::timestamptz, now());

-- name: notify
SELECT pg_notify($1, $2);

-- name: task_get
SELECT * FROM tasks WHERE id = $1 AND tenant_id = $2;

-- name: task_list
-- Newest first through tasks_tenant_idx; with a status filter, see task_list_by_status.
SELECT * FROM tasks
WHERE tenant_id = $1
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR name = $3)
  AND ($4::text IS NULL OR schedule_id = $4)
  AND labels @> $5::jsonb
  AND ($6::timestamptz IS NULL OR run_at >= $6)
  AND ($7::timestamptz IS NULL OR run_at < $7)
  AND ($8::uuid IS NULL OR id < $8)
ORDER BY id DESC
LIMIT $9;

-- name: task_list_by_status
-- The same with a status filter, through tasks_tenant_status_idx: a rare status (the failed
-- ones, the dead-letter set) is found without walking every task of the tenant.
SELECT * FROM tasks
WHERE tenant_id = $1
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR name = $3)
  AND ($4::text IS NULL OR schedule_id = $4)
  AND labels @> $5::jsonb
  AND ($6::timestamptz IS NULL OR run_at >= $6)
  AND ($7::timestamptz IS NULL OR run_at < $7)
  AND ($8::uuid IS NULL OR id < $8)
  AND status = ANY($10::text[])
ORDER BY id DESC
LIMIT $9;

-- name: task_update
-- A new run_at moves due_at; a waiting task follows it between scheduled and ready.
UPDATE tasks t SET
    run_at = coalesce($4::timestamptz, t.run_at),
    due_at = coalesce($4::timestamptz, t.due_at),
    status = CASE
        WHEN $4::timestamptz IS NULL OR t.status = 'blocked' THEN t.status
        WHEN $4::timestamptz <= coalesce($1::timestamptz, now()) THEN
            CASE WHEN t.status = 'scheduled' OR t.status = 'retrying' THEN 'ready'
                 ELSE t.status END
        ELSE 'scheduled' END,
    payload = coalesce($5::text, t.payload),
    priority = coalesce($6::int, t.priority),
    labels = coalesce($7::jsonb, t.labels),
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3
  AND t.status IN ('scheduled', 'blocked', 'ready', 'retrying')
RETURNING t.*;

-- name: task_cancel
-- A running task keeps running and ends cancelled with its attempt (see task_complete_many).
UPDATE tasks t SET
    status = CASE WHEN t.status = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = t.status = 'running',
    finished_at = CASE WHEN t.status = 'running' THEN NULL
                       ELSE coalesce($1::timestamptz, now()) END,
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3
  AND t.status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running')
RETURNING t.*;

-- name: task_retry
UPDATE tasks t SET
    status = 'ready',
    series_start = t.attempts,
    due_at = coalesce($1::timestamptz, now()),
    last_error = NULL,
    result = NULL,
    finished_at = NULL,
    cancel_requested = false,
    lease_id = NULL,
    lease_expires_at = NULL,
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3 AND t.status IN ('failed', 'cancelled')
RETURNING t.*;

-- name: attempt_list
-- One row with a NULL number when the task exists without attempts; none when it is not ours.
SELECT t.id AS task_id, a.number, a.started_at, a.finished_at, a.outcome, a.error,
       a.http_status, a.duration_ms, a.worker
FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
WHERE t.id = $1 AND t.tenant_id = $2
ORDER BY a.number;

-- name: task_deps_fail
-- Parents $2 failed or were cancelled: every blocked descendant fails (transitively).
WITH RECURSIVE doomed(id) AS (
    SELECT d.child_id FROM task_deps d
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
    WHERE d.parent_id = ANY($2::uuid[])
  UNION
    SELECT d.child_id FROM doomed
    JOIN task_deps d ON d.parent_id = doomed.id
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
)
UPDATE tasks t SET
    status = 'failed',
    last_error = 'a task it depends on failed or was cancelled',
    finished_at = coalesce($1::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id IN (SELECT id FROM doomed) AND t.status = 'blocked';

-- name: leader_attempt_elect
INSERT INTO leaders AS l (name, node_id, expires_at)
VALUES ($2, $3, coalesce($1::timestamptz, now()) + make_interval(secs => $4))
ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at
WHERE l.node_id = excluded.node_id OR l.expires_at <= coalesce($1::timestamptz, now())
RETURNING node_id;

-- name: leader_resign
DELETE FROM leaders WHERE name = $1 AND node_id = $2;
