-- The PostgreSQL store's schedule queries (see schedules.py). $1 is the pinned time (NULL in
-- production: the database clock decides) wherever a query needs "now".

-- name: schedule_now
SELECT coalesce($1::timestamptz, now());

-- name: schedule_insert
-- The schedule and its first revision in one statement ($20: next_run_at, NULL = the cursor).
WITH made AS (
    INSERT INTO schedules (
        id, tenant_id, cron, every, rrule, timezone, start_at, end_at, jitter_seconds,
        dst_nonexistent, dst_ambiguous, task, overlap, catchup, catchup_window_seconds,
        catchup_max_runs, anchor_at, next_run_at, materialized_until, created_at, updated_at)
    VALUES (
        $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16, $17, $18,
        coalesce($20::timestamptz, $19), $19, coalesce($1::timestamptz, now()),
        coalesce($1::timestamptz, now()))
    RETURNING *
), revision AS (
    INSERT INTO schedule_revisions (schedule_id, at, actor, action, before, after)
    SELECT id, created_at, $21::text, 'create', '{}', $22::jsonb FROM made
)
SELECT * FROM made;

-- name: schedule_get
SELECT * FROM schedules WHERE id = $1 AND tenant_id = $2 AND NOT deleted;

-- name: schedule_get_for_update
SELECT * FROM schedules WHERE id = $1 AND tenant_id = $2 AND NOT deleted FOR UPDATE;

-- name: schedule_list
-- Newest first; $3..$5 are optional filters (NULL = any).
SELECT * FROM schedules
WHERE tenant_id = $1 AND NOT deleted
  AND ($2::text IS NULL OR id < $2)
  AND ($3::boolean IS NULL OR paused = $3)
  AND ($4::text IS NULL OR task->>'queue' = $4)
  AND ($5::text IS NULL OR task->>'name' = $5)
ORDER BY id DESC
LIMIT $6;

-- name: schedule_write
-- Every column a user change may touch; the caller holds the row lock and checked the version.
UPDATE schedules SET
    cron = $3, every = $4, rrule = $5, timezone = $6, start_at = $7, end_at = $8,
    jitter_seconds = $9, dst_nonexistent = $10, dst_ambiguous = $11, task = $12::jsonb,
    overlap = $13, catchup = $14, catchup_window_seconds = $15, catchup_max_runs = $16,
    paused = $17, pause_note = $18, paused_at = $19, resumed_at = $20, resume_catchup = $21,
    next_run_at = $22, materialized_until = $23, buffered_at = $24,
    version = version + 1, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2
RETURNING *;

-- name: schedule_mark_deleted
UPDATE schedules SET deleted = true, version = version + 1, next_run_at = NULL,
    buffered_at = NULL, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND tenant_id = $3 AND NOT deleted
RETURNING id;

-- name: schedule_revision_insert
INSERT INTO schedule_revisions (schedule_id, at, actor, action, before, after)
VALUES ($2, coalesce($1::timestamptz, now()), $3, $4, $5::jsonb, $6::jsonb);

-- name: schedule_revision_list
SELECT * FROM schedule_revisions
WHERE schedule_id = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3;

-- name: schedule_due
-- Each branch is a range scan of its own partial index (see 0003_schedules.sql), so a round
-- reads only schedules with an occurrence to handle; the ones only waiting for a previous run
-- (buffer_one) come last, least recently looked at
-- first (a round moves their cursor, so more of them than a batch take turns).
SELECT s.*, t.status AS last_task_status FROM (
    SELECT *, false AS waiting FROM schedules
    WHERE NOT paused AND NOT deleted AND overlap = 'allow' AND next_run_at <= $2
    UNION ALL
    SELECT *, false AS waiting FROM schedules
    WHERE NOT paused AND NOT deleted AND overlap <> 'allow' AND next_run_at <= $1
    UNION ALL
    SELECT *, true AS waiting FROM schedules
    WHERE buffered_at IS NOT NULL AND NOT paused AND NOT deleted
      AND overlap <> 'allow' AND (next_run_at IS NULL OR next_run_at > $1)
) AS s
LEFT JOIN tasks t ON t.id = s.last_task_id
ORDER BY s.waiting, CASE WHEN s.waiting THEN s.materialized_until ELSE s.next_run_at END
LIMIT $3;

-- name: schedule_lock_guarded
-- Lock the schedules whose plan still applies (same version, cursor and buffer; active). A
-- racing materializer waits here, then finds the cursor moved and applies nothing.
SELECT s.id FROM schedules s
JOIN unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::timestamptz[])
    AS g(id, version, cursor, buffered) ON s.id = g.id
WHERE s.version = g.version AND s.materialized_until = g.cursor
  AND s.buffered_at IS NOT DISTINCT FROM g.buffered AND NOT s.paused AND NOT s.deleted
ORDER BY s.id
FOR UPDATE OF s;

-- name: schedule_task_insert
-- task_insert's twin for occurrences: the unique (schedule_id, scheduled_for) index is the
-- conflict target, so a second task for an occurrence is never made. $2 is a task_input[].
INSERT INTO tasks AS t (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, schedule_id,
    scheduled_for, run_at, due_at, created_at, updated_at, cancel_requested)
SELECT
    i.id, i.tenant_id, i.name, i.queue,
    CASE WHEN coalesce(i.run_at, c.now) <= c.now THEN 'ready' ELSE 'scheduled' END,
    1, i.target_type, i.target, i.payload, NULL, i.priority, i.retry, i.timeout_seconds,
    '{}', 0, false, i.concurrency_key, i.labels, 0, 0, i.schedule_id, i.scheduled_for,
    coalesce(i.run_at, c.now), coalesce(i.run_at, c.now), c.now, c.now, false
FROM unnest($2::task_input[]) AS i
CROSS JOIN (SELECT coalesce($1::timestamptz, now()) AS now) AS c
ON CONFLICT (schedule_id, scheduled_for) WHERE schedule_id IS NOT NULL DO NOTHING
RETURNING t.*;

-- name: schedule_tasks_at
-- Tasks already made for (schedule, instant) pairs.
SELECT t.* FROM tasks t
JOIN unnest($1::text[], $2::timestamptz[]) AS k(schedule_id, at)
    ON t.schedule_id = k.schedule_id AND t.scheduled_for = k.at;

-- name: schedule_tick_insert_many
INSERT INTO schedule_ticks (schedule_id, nominal, outcome, task_id, detail, recorded_at)
SELECT k.schedule_id, k.nominal, k.outcome, k.task_id, k.detail, coalesce($1::timestamptz, now())
FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::uuid[], $6::text[])
    AS k(schedule_id, nominal, outcome, task_id, detail)
ON CONFLICT DO NOTHING;

-- name: schedule_advance_many
UPDATE schedules s SET
    materialized_until = u.cursor, next_run_at = u.next_run_at, buffered_at = u.buffered,
    last_task_id = coalesce(u.last_task_id, s.last_task_id),
    resumed_at = CASE WHEN u.clear_resume THEN NULL ELSE s.resumed_at END,
    resume_catchup = CASE WHEN u.clear_resume THEN NULL ELSE s.resume_catchup END
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::uuid[],
            $6::boolean[])
    AS u(id, cursor, next_run_at, buffered, last_task_id, clear_resume)
WHERE s.id = u.id;

-- name: schedule_tick_list
SELECT * FROM schedule_ticks
WHERE schedule_id = $1
  AND ($2::text[] IS NULL OR outcome = ANY($2))
  AND ($3::timestamptz IS NULL OR (nominal, outcome) < ($3, $4::text))
ORDER BY nominal DESC, outcome DESC
LIMIT $5;

-- name: schedule_tasks_drop_future
-- Occurrences not started yet after $2 go, so they can be made again under new settings. A
-- task others depend on stays (deleting it would strand its dependents).
DELETE FROM tasks
WHERE schedule_id = $1 AND scheduled_for > $2 AND status = 'scheduled' AND attempts = 0
  AND NOT has_dependents
RETURNING id;

-- name: schedule_ticks_drop_future
DELETE FROM schedule_ticks
WHERE schedule_id = $1 AND nominal > $2
  AND outcome IN ('fired', 'dst_shifted', 'dst_skipped', 'caught_up', 'skipped_overlap')
  AND (task_id IS NULL OR task_id = ANY($3::uuid[]));

-- name: schedule_tasks_cancel_pending
UPDATE tasks SET status = 'cancelled', version = version + 1,
    finished_at = coalesce($1::timestamptz, now()), updated_at = coalesce($1::timestamptz, now())
WHERE schedule_id = $2 AND status IN ('scheduled', 'ready', 'blocked') AND attempts = 0
RETURNING id, has_dependents;

-- name: schedule_set_key
-- A new schedule's declarative key (unique per tenant among live schedules: a racing
-- declaration fails here with a unique violation and its whole transaction rolls back).
UPDATE schedules SET key = $2 WHERE id = $1 RETURNING *;

-- name: schedule_get_by_key
SELECT * FROM schedules WHERE tenant_id = $1 AND key = $2 AND NOT deleted;
