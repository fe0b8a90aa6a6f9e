-- The engine's single statements on tasks (plans in duetime/store/core/hot.py). Times are
-- INTEGER microseconds; lists are one JSON text parameter.

-- The WHERE text matches the tasks_due partial index exactly, so SQLite can use it.
-- name: task_promote_due
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status IN ('scheduled', 'retrying') AND due_at <= :now
    ORDER BY due_at
    LIMIT :limit);

-- The promoter's isolation path (see duetime.store.isolation): the ids task_promote_due takes.
-- name: task_due_ids
SELECT id FROM tasks
WHERE status IN ('scheduled', 'retrying') AND due_at <= :now
ORDER BY due_at
LIMIT :limit;

-- name: task_promote
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('scheduled', 'retrying') AND due_at <= :now;

-- name: task_next_due_at
SELECT min(due_at) AS due_at FROM tasks WHERE status IN ('scheduled', 'retrying');

-- Heartbeat: only a live lease is extended; once expired it belongs to the reaper.
-- name: task_heartbeat
UPDATE tasks SET lease_expires_at = :now + CAST(round(:extend_seconds * 1000000) AS INTEGER)
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND lease_expires_at > :now
RETURNING lease_id, lease_expires_at;

-- name: task_expired_leases
SELECT * FROM tasks
WHERE status = 'running' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit;
