-- Tasks as the API reads and changes them (plans in duetime/store/core/tasks.py).
-- Each change is one UPDATE conditional on the statuses the plan allows (:statuses); when it
-- matches nothing the plan reads the task to tell "not found" from "conflict".

-- name: task_get
SELECT * FROM tasks WHERE id = :id AND tenant_id = :tenant_id;

-- Newest first. Every optional filter is NULL when unused, and these statements run with custom
-- plans (a generic plan here costs a sort of the tenant's tasks, so PostgreSQL never keeps one),
-- which fold the NULL tests away: without a status the plan walks tasks_tenant_idx newest
-- first; with a status filter it reaches tasks_tenant_status_idx, so a rare status (the failed
-- ones, the dead-letter set) is found without walking every task of the tenant.
-- One status is asked as "status = <it>", as SQLite's task_list does: that walk of
-- tasks_tenant_status_idx is then in id order and stops after a page. Asked as "= ANY" of one,
-- the index cannot give that order, and with statistics that know of many tasks in that status
-- the planner walked tasks_tenant_idx instead, filtering out every newer task of another status
-- (390 ms for a page of 20,000 succeeded tasks under 160,000 newer ones, against 1.5 ms).
-- name: task_list
SELECT * FROM tasks
WHERE tenant_id = :tenant_id
  AND (:statuses::text[] IS NULL
       OR CASE WHEN cardinality(:statuses::text[]) = 1 THEN status = (:statuses::text[])[1]
               ELSE status = ANY(:statuses::text[]) END)
  AND (:queue::text IS NULL OR queue = :queue)
  AND (:name::text IS NULL OR name = :name)
  AND (:schedule_id::text IS NULL OR schedule_id = :schedule_id)
  AND (:labels::jsonb IS NULL OR labels @> :labels::jsonb)
  AND (:run_after::timestamptz IS NULL OR run_at >= :run_after)
  AND (:run_before::timestamptz IS NULL OR run_at < :run_before)
  AND (:cursor::uuid IS NULL OR id < :cursor)
ORDER BY id DESC
LIMIT :limit;

-- A new run_at moves due_at; a waiting task follows it between scheduled and ready.
-- name: task_update
UPDATE tasks t SET
    run_at = coalesce(:run_at::timestamptz, t.run_at),
    due_at = coalesce(:run_at::timestamptz, t.due_at),
    status = CASE
        WHEN :run_at::timestamptz IS NULL OR t.status = 'blocked' THEN t.status
        WHEN :run_at::timestamptz <= coalesce(:now::timestamptz, now()) THEN 'ready'
        ELSE 'scheduled' END,
    payload = coalesce(:payload_json::text, t.payload),
    priority = coalesce(:priority::int, t.priority),
    labels = coalesce(:labels::jsonb, t.labels),
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = :id AND t.tenant_id = :tenant_id AND t.status = ANY(:statuses::text[])
RETURNING t.*;

-- A running task keeps running and ends cancelled with its attempt (see task_complete_many).
-- name: task_cancel
UPDATE tasks t SET
    status = CASE WHEN t.status = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = t.status = 'running',
    finished_at = CASE WHEN t.status = 'running' THEN NULL
                       ELSE coalesce(:now::timestamptz, now()) END,
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = :id AND t.tenant_id = :tenant_id AND t.status = ANY(:statuses::text[])
RETURNING t.*;

-- A dead-letter replay: a new attempt series, due now.
-- name: task_retry
UPDATE tasks t SET
    status = 'ready',
    series_start = t.attempts,
    due_at = coalesce(:now::timestamptz, now()),
    last_error = NULL,
    result = NULL,
    finished_at = NULL,
    cancel_requested = false,
    lease_id = NULL,
    lease_expires_at = NULL,
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = :id AND t.tenant_id = :tenant_id AND t.status = ANY(:statuses::text[])
RETURNING t.*;

-- One row with a NULL number when the task exists without attempts; none when it is not ours.
-- name: attempt_list
SELECT t.id AS task_id, a.number, a.started_at, a.finished_at, a.outcome, a.error,
       a.http_status, a.duration_ms, a.worker, a.logs, a.response
FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
WHERE t.id = :id AND t.tenant_id = :tenant_id
ORDER BY a.number;

-- A lease is current while its task runs under it (tasks_lease_is_running). One probe of
-- tasks_lease_id_idx per lease id: a plain "lease_id = ANY(:lease_ids)" may, under statistics
-- taken when nothing ran, walk tasks_lease_expiry_idx (every running task) instead.
-- name: task_leases_get
SELECT t.*
FROM unnest(:lease_ids::uuid[]) AS l (id)
CROSS JOIN LATERAL (
    SELECT * FROM tasks
    WHERE lease_id = l.id AND status = 'running'
      AND (:tenant_id::text IS NULL OR tenant_id = :tenant_id)
    ORDER BY lease_id
    LIMIT 1
) AS t;
