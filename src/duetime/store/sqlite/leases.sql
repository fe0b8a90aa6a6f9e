-- Leases ended without an attempt (plans in duetime/store/core/leases.py).

-- name: task_release_find
-- The tasks running under :lease_ids (via tasks_lease_id), for task_release.
SELECT lease_id, id FROM tasks
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: task_release
-- Hand back each of :ids (its lease :lease_ids, in :statuses, due again :delays seconds from
-- now, pairwise: duetime.lifecycle.release decided both); fenced on the lease again. (No
-- UPDATE ... FROM: it needs SQLite 3.33.)
WITH r (id, lease_id, delay, status) AS (
    SELECT i.value, l.value, d.value, s.value
    FROM json_each(:ids) AS i
    JOIN json_each(:lease_ids) AS l ON l.key = i.key
    JOIN json_each(:delays) AS d ON d.key = i.key
    JOIN json_each(:statuses) AS s ON s.key = i.key
)
UPDATE tasks SET
    status = (SELECT status FROM r WHERE r.id = tasks.id),
    due_at = :now + CAST(round((SELECT delay FROM r WHERE r.id = tasks.id) * 1000000) AS INTEGER),
    attempts = attempts - 1,
    version = version + 1,
    lease_id = NULL,
    lease_expires_at = NULL,
    worker_id = NULL,
    started_at = NULL,
    updated_at = :now
WHERE id IN (SELECT id FROM r)
  AND lease_id = (SELECT lease_id FROM r WHERE r.id = tasks.id)
  AND status = 'running' AND cancel_requested = 0
RETURNING id, queue, status;

-- name: task_cancel_requested
SELECT id FROM tasks
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'running' AND cancel_requested = 1;
