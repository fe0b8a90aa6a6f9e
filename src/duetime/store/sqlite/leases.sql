-- Leases ended without an attempt (plans in duetime/store/core/leases.py).

-- name: task_release
UPDATE tasks SET
    status = CASE WHEN :delay > 0 THEN 'scheduled' ELSE 'ready' END,
    due_at = :now + CAST(round(:delay * 1000000) AS INTEGER),
    attempts = attempts - 1,
    version = version + 1,
    lease_id = NULL,
    lease_expires_at = NULL,
    worker_id = NULL,
    started_at = NULL,
    updated_at = :now
WHERE lease_id = :lease_id AND status = 'running' AND cancel_requested = 0
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING id, queue, status;

-- name: task_cancel_requested
SELECT id FROM tasks
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'running' AND cancel_requested = 1;
