-- Schedules (SPEC §3 "Schedules"): the statements of the plans in duetime/store/core/schedules.py,
-- in PostgreSQL's dialect. :now is the pinned time (NULL in production: the database clock
-- decides). A batch statement (core.plan.Batch) gets each parameter as an array and unnests them.

-- name: schedule_insert
INSERT INTO schedules (
    id, tenant_id, cron, every, rrule, timezone, start_at, end_at, jitter_seconds,
    dst_nonexistent, dst_ambiguous, task, overlap, catchup, catchup_window_seconds,
    catchup_max_runs, anchor_at, next_run_at, materialized_until, created_at, updated_at, key)
VALUES (
    :id, :tenant_id, :cron, :every, :rrule, :timezone, :start_at, :end_at, :jitter_seconds,
    :dst_nonexistent, :dst_ambiguous, :task::jsonb, :overlap, :catchup,
    :catchup_window_seconds, :catchup_max_runs, :anchor_at,
    coalesce(:next_run_at::timestamptz, :materialized_until), :materialized_until,
    coalesce(:now::timestamptz, now()), coalesce(:now::timestamptz, now()), :key)
RETURNING *;

-- name: schedule_get
SELECT * FROM schedules WHERE id = :id AND tenant_id = :tenant_id AND NOT deleted;

-- name: schedule_get_for_update
SELECT * FROM schedules WHERE id = :id AND tenant_id = :tenant_id AND NOT deleted FOR UPDATE;

-- name: schedule_get_by_key
SELECT * FROM schedules WHERE tenant_id = :tenant_id AND key = :key AND NOT deleted;

-- name: schedule_list
-- Newest first; :paused, :queue and :name are optional filters (NULL = any).
SELECT * FROM schedules
WHERE tenant_id = :tenant_id AND NOT deleted
  AND (:cursor::text IS NULL OR id < :cursor)
  AND (:paused::boolean IS NULL OR paused = :paused)
  AND (:queue::text IS NULL OR task->>'queue' = :queue)
  AND (:name::text IS NULL OR task->>'name' = :name)
ORDER BY id DESC
LIMIT :limit;

-- name: schedule_write
-- Every column a user change may touch; the caller holds the row lock and checked the version.
UPDATE schedules SET
    cron = :cron, every = :every, rrule = :rrule, timezone = :timezone, start_at = :start_at,
    end_at = :end_at, jitter_seconds = :jitter_seconds, dst_nonexistent = :dst_nonexistent,
    dst_ambiguous = :dst_ambiguous, task = :task::jsonb, overlap = :overlap, catchup = :catchup,
    catchup_window_seconds = :catchup_window_seconds, catchup_max_runs = :catchup_max_runs,
    paused = :paused, pause_note = :pause_note, paused_at = :paused_at,
    resumed_at = :resumed_at, resume_catchup = :resume_catchup, next_run_at = :next_run_at,
    materialized_until = :materialized_until, buffered_at = :buffered_at,
    version = version + 1, updated_at = coalesce(:now::timestamptz, now())
WHERE id = :id AND version = :version AND NOT deleted
RETURNING *;

-- name: schedule_mark_deleted
UPDATE schedules SET deleted = true, version = version + 1, next_run_at = NULL,
    buffered_at = NULL, updated_at = coalesce(:now::timestamptz, now())
WHERE id = :id AND tenant_id = :tenant_id AND NOT deleted
RETURNING id;

-- name: schedule_tasks_cancel_pending
-- Deleting a schedule cancels its occurrences that have not started.
UPDATE tasks SET status = 'cancelled', version = version + 1,
    finished_at = coalesce(:now::timestamptz, now()),
    updated_at = coalesce(:now::timestamptz, now())
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'ready', 'blocked')
  AND attempts = 0
RETURNING id, has_dependents;

-- name: schedule_revision_insert
INSERT INTO schedule_revisions (schedule_id, at, actor, action, before, after)
VALUES (:schedule_id, coalesce(:now::timestamptz, now()), :actor, :action, :before::jsonb,
        :after::jsonb);

-- name: schedule_revision_list
SELECT * FROM schedule_revisions
WHERE schedule_id = :schedule_id AND (:cursor::bigint IS NULL OR id < :cursor)
ORDER BY id DESC
LIMIT :limit;

-- name: schedule_due
-- Each branch is a range scan of its own partial index (see 0003_schedules.sql), so a round
-- reads only schedules with an occurrence to handle; the ones only waiting for a previous run
-- (buffer_one) come last, least recently looked at first (a round moves their cursor, so more of
-- them than a batch take turns).
-- Each branch stops at :limit in the order the round wants (the first two walk their index in
-- next_run_at order): unbounded, every due schedule was read, joined to its last task and sorted
-- for each round, however few it then took (26 ms for 100 of 20,000 due schedules, then ~1 ms).
SELECT s.*, t.status AS last_task_status FROM (
    (SELECT *, false AS waiting FROM schedules
     WHERE NOT paused AND NOT deleted AND overlap = 'allow' AND next_run_at <= :horizon
     ORDER BY next_run_at
     LIMIT :limit)
    UNION ALL
    (SELECT *, false AS waiting FROM schedules
     WHERE NOT paused AND NOT deleted AND overlap <> 'allow' AND next_run_at <= :at
     ORDER BY next_run_at
     LIMIT :limit)
    UNION ALL
    (SELECT *, true AS waiting FROM schedules
     WHERE buffered_at IS NOT NULL AND NOT paused AND NOT deleted
       AND overlap <> 'allow' AND (next_run_at IS NULL OR next_run_at > :at)
     ORDER BY materialized_until
     LIMIT :limit)
) AS s
LEFT JOIN tasks t ON t.id = s.last_task_id
ORDER BY s.waiting, CASE WHEN s.waiting THEN s.materialized_until ELSE s.next_run_at END
LIMIT :limit;

-- name: schedule_lock_guarded
-- (batch) Lock the schedules whose plan still applies (same version, cursor and buffer;
-- active). A racing materializer waits here, then finds the cursor moved and applies nothing.
SELECT s.id FROM schedules s
JOIN unnest(:id::text[], :version::bigint[], :cursor::timestamptz[], :buffered::timestamptz[])
    AS g(id, version, cursor, buffered) ON s.id = g.id
WHERE s.version = g.version AND s.materialized_until = g.cursor
  AND s.buffered_at IS NOT DISTINCT FROM g.buffered AND NOT s.paused AND NOT s.deleted
ORDER BY s.id
FOR UPDATE OF s;

-- name: schedule_task_insert
-- (batch) Occurrences' tasks; the unique (schedule_id, scheduled_for) index is the conflict
-- target, so a second task for an occurrence is never made (nothing comes back for it).
INSERT INTO tasks AS t (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, schedule_id,
    scheduled_for, run_at, due_at, created_at, updated_at, cancel_requested, flow_key)
SELECT
    i.id, i.tenant_id, i.name, i.queue,
    CASE WHEN coalesce(i.run_at, c.now) <= c.now THEN 'ready' ELSE 'scheduled' END,
    1, i.target_type, i.target::jsonb, i.payload, NULL, i.priority, i.retry::jsonb,
    i.timeout_seconds, '{}', 0, false, i.concurrency_key, i.labels::jsonb, 0, 0, i.schedule_id,
    i.scheduled_for, coalesce(i.run_at, c.now), coalesce(i.run_at, c.now), c.now, c.now, false,
    i.flow_key
FROM unnest(
    :id::uuid[], :tenant_id::text[], :name::text[], :queue::text[], :target_type::text[],
    :target::text[], :payload::text[], :priority::integer[], :retry::text[],
    :timeout_seconds::double precision[], :concurrency_key::text[], :labels::text[],
    :schedule_id::text[], :scheduled_for::timestamptz[], :run_at::timestamptz[],
    :flow_key::text[]
) AS i(id, tenant_id, name, queue, target_type, target, payload, priority, retry,
       timeout_seconds, concurrency_key, labels, schedule_id, scheduled_for, run_at, flow_key)
CROSS JOIN (SELECT coalesce(:now::timestamptz, now()) AS now) AS c
ON CONFLICT (schedule_id, scheduled_for) WHERE schedule_id IS NOT NULL DO NOTHING
RETURNING t.*;

-- name: schedule_tasks_at
-- (batch) The tasks made for (schedule, instant) pairs.
SELECT t.* FROM tasks t
JOIN unnest(:schedule_id::text[], :scheduled_for::timestamptz[]) AS k(schedule_id, at)
    ON t.schedule_id = k.schedule_id AND t.scheduled_for = k.at;

-- name: schedule_tick_insert
-- (batch) A repeat of (schedule_id, nominal, outcome) is ignored.
INSERT INTO schedule_ticks (schedule_id, nominal, outcome, task_id, detail, recorded_at)
SELECT k.schedule_id, k.nominal, k.outcome, k.task_id, k.detail, coalesce(:now::timestamptz, now())
FROM unnest(:schedule_id::text[], :nominal::timestamptz[], :outcome::text[], :task_id::uuid[],
            :detail::text[])
    AS k(schedule_id, nominal, outcome, task_id, detail)
ON CONFLICT DO NOTHING;

-- name: schedule_advance
-- (batch) Materializer plans' new cursors.
UPDATE schedules s SET
    materialized_until = u.cursor, next_run_at = u.next_run_at, buffered_at = u.buffered,
    last_task_id = coalesce(u.last_task_id, s.last_task_id),
    resumed_at = CASE WHEN u.clear_resume THEN NULL ELSE s.resumed_at END,
    resume_catchup = CASE WHEN u.clear_resume THEN NULL ELSE s.resume_catchup END
FROM unnest(:id::text[], :materialized_until::timestamptz[], :next_run_at::timestamptz[],
            :buffered_at::timestamptz[], :last_task_id::uuid[], :clear_resume::boolean[])
    AS u(id, cursor, next_run_at, buffered, last_task_id, clear_resume)
WHERE s.id = u.id;

-- name: schedule_tick_list
SELECT * FROM schedule_ticks
WHERE schedule_id = :schedule_id
  AND (:outcomes::text[] IS NULL OR outcome = ANY(:outcomes))
  AND (:cursor_nominal::timestamptz IS NULL
       OR (nominal, outcome) < (:cursor_nominal, :cursor_outcome::text))
ORDER BY nominal DESC, outcome DESC
LIMIT :limit;

-- name: schedule_tasks_drop_future
-- Occurrences not started yet after :after go, so they can be made again under new settings. A
-- task others depend on stays (deleting it would strand its dependents).
DELETE FROM tasks
WHERE schedule_id = :schedule_id AND scheduled_for > :after AND status = 'scheduled'
  AND attempts = 0 AND NOT has_dependents
RETURNING id;

-- name: schedule_ticks_drop_future
-- The ledger rows of the occurrences just forgotten (and instants that made no task).
DELETE FROM schedule_ticks
WHERE schedule_id = :schedule_id AND nominal > :after
  AND outcome IN ('fired', 'dst_shifted', 'dst_skipped', 'caught_up', 'skipped_overlap')
  AND (task_id IS NULL OR task_id = ANY(:task_ids::uuid[]));
