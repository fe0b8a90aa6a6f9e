-- Who may use the SQL API (plans in duetime/store/postgres/sqlapi.py; the functions are
-- migration 0024's).

-- name: sql_api_grant
SELECT sql_api_grant(:role, :tenant_id);

-- name: sql_api_settings_put
UPDATE sql_api_settings SET max_payload_bytes = :max_payload_bytes;

-- name: sql_api_revoke
SELECT sql_api_revoke(:role);

-- name: sql_api_producers
SELECT role_name, tenant_id FROM sql_producers ORDER BY role_name;

-- Workflows requested through the SQL API (migration 0031), taken by a node to make.

-- name: sql_workflow_requests_take
UPDATE sql_workflow_requests r
SET taken_until = now() + make_interval(secs => :hold_seconds)
WHERE r.id IN (
    SELECT w.id FROM sql_workflow_requests w
    WHERE w.state = 'pending' AND (w.taken_until IS NULL OR w.taken_until < now())
    ORDER BY w.requested_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
RETURNING r.id, r.tenant_id, r.role_name, r.body::text AS body, r.fingerprint, r.requested_at;

-- name: sql_workflow_requests_end
UPDATE sql_workflow_requests r
SET state = CASE WHEN e.workflow_id IS NULL THEN 'refused' ELSE 'made' END,
    workflow_id = e.workflow_id, problem = e.problem::jsonb, ended_at = now(),
    taken_until = NULL
FROM unnest(:ids::uuid[], :workflow_ids::uuid[], :problems::text[])
     AS e (id, workflow_id, problem)
WHERE r.id = e.id AND r.state = 'pending'
RETURNING r.id, r.tenant_id;

-- name: sql_workflow_requests_sweep
DELETE FROM sql_workflow_requests
WHERE id IN (
    SELECT id FROM sql_workflow_requests
    WHERE state <> 'pending' AND ended_at < now() - make_interval(secs => :older_than_seconds)
    LIMIT :limit);
