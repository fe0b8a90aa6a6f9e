-- Schedules (SPEC §3 "Schedules"): the statements of the plans in duetime/store/core/schedules.py,
-- in SQLite's dialect. Timestamps are INTEGER microseconds, JSON is text, booleans are 0/1; a
-- list parameter is a JSON array (read with json_each). A batch statement (core.plan.Batch) runs
-- once per row here; PostgreSQL's twin takes arrays.

-- name: schedule_insert
INSERT INTO schedules (
    id, tenant_id, cron, every, rrule, timezone, start_at, end_at, jitter_seconds,
    dst_nonexistent, dst_ambiguous, task, overlap, catchup, catchup_window_seconds,
    catchup_max_runs, anchor_at, paused, next_run_at, materialized_until, version, created_at,
    updated_at, deleted, key
) VALUES (
    :id, :tenant_id, :cron, :every, :rrule, :timezone, :start_at, :end_at, :jitter_seconds,
    :dst_nonexistent, :dst_ambiguous, :task, :overlap, :catchup, :catchup_window_seconds,
    :catchup_max_runs, :anchor_at, 0, coalesce(:next_run_at, :materialized_until),
    :materialized_until, 1, :now, :now, 0, :key
)
RETURNING *;

-- name: schedule_get
SELECT * FROM schedules WHERE id = :id AND tenant_id = :tenant_id AND deleted = 0;

-- The write transaction (BEGIN IMMEDIATE) already holds every row.
-- name: schedule_get_for_update
SELECT * FROM schedules WHERE id = :id AND tenant_id = :tenant_id AND deleted = 0;

-- name: schedule_get_by_key
SELECT * FROM schedules WHERE tenant_id = :tenant_id AND key = :key AND deleted = 0;

-- name: schedule_list
-- Newest first; :paused, :queue and :name are optional filters (NULL = any). The first page's
-- cursor sorts after every id, so the (tenant_id, id DESC) index serves it as a range.
SELECT * FROM schedules
WHERE tenant_id = :tenant_id AND deleted = 0 AND id < coalesce(:cursor, char(1114111))
  AND (:paused IS NULL OR paused = :paused)
  AND (:queue IS NULL OR json_extract(task, '$.queue') = :queue)
  AND (:name IS NULL OR json_extract(task, '$.name') = :name)
ORDER BY id DESC
LIMIT :limit;

-- name: schedule_write
-- Every column a user change may touch, conditional on the version the change was made from.
UPDATE schedules SET
    cron = :cron, every = :every, rrule = :rrule, timezone = :timezone, start_at = :start_at,
    end_at = :end_at, jitter_seconds = :jitter_seconds, dst_nonexistent = :dst_nonexistent,
    dst_ambiguous = :dst_ambiguous, task = :task, overlap = :overlap, catchup = :catchup,
    catchup_window_seconds = :catchup_window_seconds, catchup_max_runs = :catchup_max_runs,
    paused = :paused, pause_note = :pause_note, paused_at = :paused_at,
    resumed_at = :resumed_at, resume_catchup = :resume_catchup, next_run_at = :next_run_at,
    materialized_until = :materialized_until, buffered_at = :buffered_at,
    version = version + 1, updated_at = :now
WHERE id = :id AND version = :version AND deleted = 0
RETURNING *;

-- name: schedule_mark_deleted
UPDATE schedules SET deleted = 1, version = version + 1, updated_at = :now, next_run_at = NULL,
    buffered_at = NULL
WHERE id = :id AND tenant_id = :tenant_id AND deleted = 0
RETURNING id;

-- name: schedule_tasks_cancel_pending
-- Deleting a schedule cancels its occurrences that have not started.
UPDATE tasks SET status = 'cancelled', version = version + 1, updated_at = :now,
    finished_at = :now
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'ready', 'blocked')
  AND attempts = 0
RETURNING id, has_dependents;

-- name: schedule_revision_insert
INSERT INTO schedule_revisions (schedule_id, at, actor, action, before, after)
VALUES (:schedule_id, :now, :actor, :action, :before, :after);

-- name: schedule_revision_list
SELECT * FROM schedule_revisions
WHERE schedule_id = :schedule_id AND id < coalesce(:cursor, 9223372036854775807)
ORDER BY id DESC
LIMIT :limit;

-- name: schedule_due
-- The schedules a materializer round must look at: overlap=allow ones with an occurrence within
-- the horizon, the others once an occurrence is due (:at), and any with an occurrence waiting for
-- the previous run (buffer_one), those last, least recently looked at first (a round moves their
-- cursor, so more of them than a batch take turns). Each branch is a range scan of its own
-- partial index. Each branch stops at :limit in the order the round wants, as PostgreSQL's
-- (where, unbounded, every due schedule was read and sorted for each round).
SELECT s.*, t.status AS last_task_status FROM (
    SELECT * FROM (
        SELECT *, 0 AS waiting FROM schedules
        WHERE paused = 0 AND deleted = 0 AND overlap = 'allow' AND next_run_at <= :horizon
        ORDER BY next_run_at
        LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT *, 0 AS waiting FROM schedules
        WHERE paused = 0 AND deleted = 0 AND overlap <> 'allow' AND next_run_at <= :at
        ORDER BY next_run_at
        LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT *, 1 AS waiting FROM schedules
        WHERE buffered_at IS NOT NULL AND paused = 0 AND deleted = 0
          AND overlap <> 'allow' AND (next_run_at IS NULL OR next_run_at > :at)
        ORDER BY materialized_until
        LIMIT :limit)
) AS s
LEFT JOIN tasks t ON t.id = s.last_task_id
ORDER BY s.waiting, CASE WHEN s.waiting THEN s.materialized_until ELSE s.next_run_at END
LIMIT :limit;

-- name: schedule_lock_guarded
-- (batch) The schedule, if its plan still applies: same version, cursor and buffer; active. The
-- write transaction already holds it.
SELECT id FROM schedules
WHERE id = :id AND version = :version AND materialized_until = :cursor
  AND buffered_at IS :buffered AND paused = 0 AND deleted = 0;

-- name: schedule_task_insert
-- (batch) An occurrence's task; the unique (schedule_id, scheduled_for) index is the conflict
-- target, so a second task for an occurrence is never made (nothing comes back then).
INSERT INTO tasks (
    id, tenant_id, name, queue, status, version, target_type, target, payload, idempotency_key,
    priority, retry, timeout_seconds, depends_on, pending_parents, has_dependents,
    concurrency_key, labels, attempts, series_start, schedule_id, scheduled_for, run_at, due_at,
    created_at, updated_at, cancel_requested, flow_key
) VALUES (
    :id, :tenant_id, :name, :queue,
    CASE WHEN coalesce(:run_at, :now) <= :now THEN 'ready' ELSE 'scheduled' END,
    1, :target_type, :target, :payload, NULL, :priority, :retry, :timeout_seconds, '[]', 0, 0,
    :concurrency_key, :labels, 0, 0, :schedule_id, :scheduled_for, coalesce(:run_at, :now),
    coalesce(:run_at, :now), :now, :now, 0, :flow_key
)
ON CONFLICT (schedule_id, scheduled_for) WHERE schedule_id IS NOT NULL DO NOTHING
RETURNING *;

-- name: schedule_tasks_at
-- (batch) The task made for an occurrence.
SELECT * FROM tasks WHERE schedule_id = :schedule_id AND scheduled_for = :scheduled_for;

-- name: schedule_tick_insert
-- (batch) A repeat of (schedule_id, nominal, outcome) is ignored.
INSERT OR IGNORE INTO schedule_ticks (schedule_id, nominal, outcome, task_id, detail, recorded_at)
VALUES (:schedule_id, :nominal, :outcome, :task_id, :detail, :now);

-- name: schedule_advance
-- (batch) A materializer plan's new cursor.
UPDATE schedules SET
    materialized_until = :materialized_until, next_run_at = :next_run_at,
    buffered_at = :buffered_at, last_task_id = coalesce(:last_task_id, last_task_id),
    resumed_at = CASE WHEN :clear_resume THEN NULL ELSE resumed_at END,
    resume_catchup = CASE WHEN :clear_resume THEN NULL ELSE resume_catchup END
WHERE id = :id;

-- name: schedule_tick_list
SELECT * FROM schedule_ticks
WHERE schedule_id = :schedule_id
  AND (:outcomes IS NULL OR outcome IN (SELECT value FROM json_each(:outcomes)))
  AND (:cursor_nominal IS NULL OR (nominal, outcome) < (:cursor_nominal, :cursor_outcome))
ORDER BY nominal DESC, outcome DESC
LIMIT :limit;

-- name: schedule_tasks_drop_future
-- Occurrences not started yet after :after go, so they can be made again under new settings.
-- A task others depend on stays (deleting it would strand its dependents).
DELETE FROM tasks
WHERE schedule_id = :schedule_id AND scheduled_for > :after AND status = 'scheduled'
  AND attempts = 0 AND has_dependents = 0
RETURNING id;

-- name: schedule_ticks_drop_future
-- The ledger rows of the occurrences just forgotten (and instants that made no task).
DELETE FROM schedule_ticks
WHERE schedule_id = :schedule_id AND nominal > :after
  AND outcome IN ('fired', 'dst_shifted', 'dst_skipped', 'caught_up', 'skipped_overlap')
  AND (task_id IS NULL OR task_id IN (SELECT value FROM json_each(:task_ids)));
