-- Leases ended without an attempt (plans in duetime/store/core/leases.py).

-- name: task_release
UPDATE tasks SET
    status = CASE WHEN :delay::float8 > 0 THEN 'scheduled' ELSE 'ready' END,
    due_at = coalesce(:now::timestamptz, now()) + make_interval(secs => :delay::float8),
    attempts = attempts - 1,
    version = version + 1,
    lease_id = NULL,
    lease_expires_at = NULL,
    worker_id = NULL,
    started_at = NULL,
    updated_at = coalesce(:now::timestamptz, now())
WHERE lease_id = :lease_id::uuid AND status = 'running' AND NOT cancel_requested
  AND (:tenant_id::text IS NULL OR tenant_id = :tenant_id::text)
RETURNING id, queue, status;

-- name: task_cancel_requested
SELECT id FROM tasks
WHERE id = ANY(:ids::uuid[]) AND status = 'running' AND cancel_requested;
