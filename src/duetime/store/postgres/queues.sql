-- Lease lookups of the PostgreSQL store (duetime.store.postgres.queues); claims are in hot_batch.sql.

-- name: task_leases_get
-- A lease is current while its task runs under it (tasks_lease_is_running). One probe of
-- tasks_lease_id_idx per lease id: a plain "lease_id = ANY($1)" may, under statistics taken
-- when nothing ran, walk tasks_lease_expiry_idx (every running task) instead.
SELECT t.*
FROM unnest($1::uuid[]) AS l (id)
CROSS JOIN LATERAL (
    SELECT * FROM tasks
    WHERE lease_id = l.id AND status = 'running'
      AND ($2::text IS NULL OR tenant_id = $2)
    ORDER BY lease_id
    LIMIT 1
) AS t;
