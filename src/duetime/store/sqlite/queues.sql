-- Lease lookups of the SQLite store (duetime.store.sqlite.queues); claims are in hot_batch.sql.

-- A lease is current while its task runs under it; via tasks_lease.
-- name: task_leases_get
SELECT * FROM tasks
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id);
