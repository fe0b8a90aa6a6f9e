-- Leases ended without an attempt (plans in duetime/store/core/leases.py).

-- name: task_release_find
-- The tasks running under :lease_ids (via tasks_lease_id_idx; a task holding a lease is running,
-- tasks_lease_is_running), for task_release.
SELECT lease_id, id FROM tasks
WHERE lease_id = ANY(:lease_ids::uuid[])
  AND (:tenant_id::text IS NULL OR tenant_id = :tenant_id::text);

-- name: task_release
-- Hand back each of :ids (its lease :lease_ids, in :statuses, due again :delays seconds from
-- now, pairwise: duetime.lifecycle.release decided both); fenced on the lease again.
UPDATE tasks t SET
    status = r.status,
    due_at = coalesce(:now::timestamptz, now()) + make_interval(secs => r.delay),
    attempts = t.attempts - 1,
    version = t.version + 1,
    lease_id = NULL,
    lease_expires_at = NULL,
    worker_id = NULL,
    started_at = NULL,
    updated_at = coalesce(:now::timestamptz, now())
FROM unnest(:ids::uuid[], :lease_ids::uuid[], :delays::float8[], :statuses::text[])
    AS r (id, lease_id, delay, status)
WHERE t.id = r.id AND t.lease_id = r.lease_id AND t.status = 'running'
  AND NOT t.cancel_requested
RETURNING t.id, t.queue, t.status;

-- name: task_cancel_requested
SELECT id FROM tasks
WHERE id = ANY(:ids::uuid[]) AND status = 'running' AND cancel_requested;
