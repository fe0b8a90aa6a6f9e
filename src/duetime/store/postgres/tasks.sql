-- Tasks as the API reads and changes them (plans in duetime/store/core/tasks.py).
-- Each change is one UPDATE conditional on the statuses the plan allows (:statuses); when it
-- matches nothing the plan reads the task to tell "not found" from "conflict".

-- name: task_get
SELECT * FROM tasks WHERE id = :id AND tenant_id = :tenant_id;

-- Newest first, every optional filter NULL when unused. One branch per status asked for (all eight
-- without a status filter, the others fold to an empty Result; one status is task_list_status),
-- each walking tasks_tenant_status_idx (tenant_id, status, id) backwards from the cursor for one
-- page; only those pages (at most eight) are sorted. The status is written as a range and the
-- branch ordered by (status, id) so that this index is the only one that gives the order: asked as
-- "status = <it>", a frequent status makes the planner walk the primary key newest first instead,
-- filtering out every newer task of other tenants and statuses (25,000 rows for a page in
-- tests/store/test_postgres_specific.py). There is no index on (tenant_id, id) alone: every task's
-- insert and each of its three status changes would add an entry to it (migration 0018,
-- docs/operations.md). Run after plan_custom, so NULL filters fold away.
-- An id prefix is :id_low below and the core's :cursor above (the lower of the page's and the
-- prefix's upper end).
-- The error and payload searches (the dashboard's) read each row the branch's other filters let
-- through; its LIMIT bounds the answer. The payload path is strict (no array unwrapping, an absent
-- key is no match, silently), as SQLite's; jsonb equality compares numbers by value, as SQLite's.
-- fragment: task_list_filters
  AND (:id_low::uuid IS NULL OR id >= :id_low::uuid)
  AND (:queue::text IS NULL OR queue = :queue)
  AND (:name::text IS NULL OR name = :name)
  AND (:schedule_id::text IS NULL OR schedule_id = :schedule_id)
  AND (:labels::jsonb IS NULL OR labels @> :labels::jsonb)
  AND (:run_after::timestamptz IS NULL OR run_at >= :run_after)
  AND (:run_before::timestamptz IS NULL OR run_at < :run_before)
  AND (:cursor::uuid IS NULL OR id < :cursor)
  AND (:error_contains::text IS NULL OR strpos(lower(last_error), lower(:error_contains)) > 0)
  AND (:payload_path::text IS NULL
       OR jsonb_path_query_first(payload::jsonb, ('strict ' || :payload_path)::jsonpath, '{}', true)
          = :payload_json::jsonb)

-- name: task_list
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'scheduled' AND status <= 'scheduled'
   AND (:statuses::text[] IS NULL OR 'scheduled' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'blocked' AND status <= 'blocked'
   AND (:statuses::text[] IS NULL OR 'blocked' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'ready' AND status <= 'ready'
   AND (:statuses::text[] IS NULL OR 'ready' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'running' AND status <= 'running'
   AND (:statuses::text[] IS NULL OR 'running' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'retrying' AND status <= 'retrying'
   AND (:statuses::text[] IS NULL OR 'retrying' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'succeeded' AND status <= 'succeeded'
   AND (:statuses::text[] IS NULL OR 'succeeded' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'failed' AND status <= 'failed'
   AND (:statuses::text[] IS NULL OR 'failed' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
UNION ALL
(SELECT * FROM tasks
 WHERE tenant_id = :tenant_id AND status >= 'cancelled' AND status <= 'cancelled'
   AND (:statuses::text[] IS NULL OR 'cancelled' = ANY(:statuses::text[]))
   -- include: task_list_filters
 ORDER BY status DESC, id DESC LIMIT :limit)
ORDER BY id DESC
LIMIT :limit;

-- One status (GET /v1/tasks?status=failed, the dead-letter set): that status's branch of
-- task_list alone, without planning seven empty ones (~0.8 ms of planning per call).
-- name: task_list_status
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND status >= :status AND status <= :status
  -- include: task_list_filters
ORDER BY status DESC, id DESC
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

-- A lease is current while its task runs under it (tasks_lease_is_running, so the probe names
-- no status: see migration 0021). One probe of tasks_lease_id_idx per lease id: a plain
-- "lease_id = ANY(:lease_ids)" may, under statistics taken when nothing ran, walk every running
-- task instead. The tenant is tested outside the probe: inside, such statistics made the probe a
-- walk of the tenant's running tasks by tasks_tenant_status_idx, every one for each lease id.
-- name: task_leases_get
SELECT t.*
FROM unnest((SELECT :lease_ids::uuid[])) AS l (id)
CROSS JOIN LATERAL (
    SELECT * FROM tasks
    WHERE lease_id = l.id
    ORDER BY lease_id
    LIMIT 1
) AS t
WHERE :tenant_id::text IS NULL OR t.tenant_id = :tenant_id;
