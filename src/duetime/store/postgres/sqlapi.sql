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
