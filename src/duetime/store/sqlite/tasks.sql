-- Tasks as the API reads and changes them (plans in duetime/store/core/tasks.py).
-- Each change is one UPDATE conditional on the statuses the plan allows (:statuses, a JSON list);
-- when it matches nothing the plan reads the task to tell "not found" from "conflict".

-- name: task_get
SELECT * FROM tasks WHERE tenant_id = :tenant_id AND id = :id;

-- Newest first, after :cursor (NULL: the first page; char(1114111) sorts after every id):
-- without a status, or with several, tasks_tenant is walked newest first; with exactly one
-- (task_list_status), (tenant_id, status, id DESC) serves both filter and order.
-- Labels: every wanted key/value pair must exist. An id prefix is a range of ids: :id_low below,
-- and above, the core's :cursor (the lower of the page's and the prefix's upper end), so the
-- index is searched between the two. The error and payload searches (the dashboard's) read each
-- row the other filters let through; the LIMIT bounds the answer. A payload match is typed:
-- json_type tells true from 1 and "42" from 42 (json_extract alone does not).
-- fragment: task_list_filters
  AND id >= coalesce(:id_low, '')
  AND (:queue IS NULL OR queue = :queue)
  AND (:name IS NULL OR name = :name)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:run_after IS NULL OR run_at >= :run_after)
  AND (:run_before IS NULL OR run_at < :run_before)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(tasks.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
  AND (:error_contains IS NULL OR instr(lower(last_error), lower(:error_contains)) > 0)
  AND (:payload_path IS NULL OR CASE
        WHEN json_type(:payload_json) IN ('integer', 'real')
          THEN json_type(payload, :payload_path) IN ('integer', 'real')
               AND json_extract(payload, :payload_path) = json_extract(:payload_json, '$')
        WHEN json_type(:payload_json) = 'text'
          THEN json_type(payload, :payload_path) = 'text'
               AND json_extract(payload, :payload_path) = json_extract(:payload_json, '$')
        ELSE json_type(payload, :payload_path) = json_type(:payload_json) END)

-- name: task_list
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND id < coalesce(:cursor, char(1114111))
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  -- include: task_list_filters
ORDER BY id DESC
LIMIT :limit;

-- name: task_list_status
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND status = :status AND id < coalesce(:cursor, char(1114111))
  -- include: task_list_filters
ORDER BY id DESC
LIMIT :limit;

-- A new run_at moves due_at; a waiting task follows it between scheduled and ready.
-- name: task_update
UPDATE tasks SET
    run_at = coalesce(:run_at, run_at),
    due_at = coalesce(:run_at, due_at),
    status = CASE
        WHEN :run_at IS NULL OR status = 'blocked' THEN status
        WHEN :run_at <= :now THEN 'ready'
        ELSE 'scheduled' END,
    payload = coalesce(:payload_json, payload),
    priority = coalesce(:priority, priority),
    labels = coalesce(:labels, labels),
    version = version + 1,
    updated_at = :now
WHERE id = :id AND tenant_id = :tenant_id
  AND status IN (SELECT value FROM json_each(:statuses))
RETURNING *;

-- A running task keeps running and ends cancelled with its attempt (see task_finish).
-- name: task_cancel
UPDATE tasks SET
    status = CASE WHEN status = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = status = 'running',
    finished_at = CASE WHEN status = 'running' THEN NULL ELSE :now END,
    version = version + 1,
    updated_at = :now
WHERE id = :id AND tenant_id = :tenant_id
  AND status IN (SELECT value FROM json_each(:statuses))
RETURNING *;

-- A dead-letter replay: a new attempt series, due now.
-- name: task_retry
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now, due_at = :now,
    series_start = attempts, last_error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = 0, lease_id = NULL, lease_expires_at = NULL
WHERE id = :id AND tenant_id = :tenant_id
  AND status IN (SELECT value FROM json_each(:statuses))
RETURNING *;

-- One row with a NULL number when the task exists without attempts; none when it is not ours.
-- name: attempt_list
SELECT t.id AS task_id, a.number, a.started_at, a.finished_at, a.outcome, a.error,
       a.http_status, a.duration_ms, a.worker, a.logs, a.response
FROM tasks AS t LEFT JOIN attempts AS a ON a.task_id = t.id
WHERE t.id = :id AND t.tenant_id = :tenant_id
ORDER BY a.number;

-- A lease is current while its task runs under it; via tasks_lease.
-- name: task_leases_get
SELECT * FROM tasks
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id);
