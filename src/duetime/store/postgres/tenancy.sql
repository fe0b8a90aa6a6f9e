-- Tenants, API keys and signing secrets (plans in duetime/store/core/tenancy.py).

-- name: tenant_insert
INSERT INTO tenants (id, name, created_at)
VALUES (:id, :name, coalesce(:now::timestamptz, now()))
RETURNING *;

-- name: tenant_get
SELECT * FROM tenants WHERE id = :id;

-- name: api_key_insert
INSERT INTO api_keys (id, tenant_id, key_hash, created_at)
VALUES (:id, :tenant_id, :key_hash, coalesce(:now::timestamptz, now()))
RETURNING *;

-- name: api_key_get_by_hash
SELECT * FROM api_keys WHERE key_hash = :key_hash;

-- name: api_key_delete
DELETE FROM api_keys WHERE id = :id;

-- name: signing_secret_insert
INSERT INTO signing_secrets (id, tenant_id, secret, created_at)
VALUES (:id, :tenant_id, :secret, coalesce(:now::timestamptz, now()));

-- Oldest first; among secrets made at the same instant the one still open-ended is the newest.
-- name: signing_secret_list_live
SELECT * FROM signing_secrets
WHERE tenant_id = :tenant_id
  AND (expires_at IS NULL OR expires_at > coalesce(:now::timestamptz, now()))
ORDER BY created_at, expires_at NULLS LAST, id;

-- least() ignores NULL, so an open-ended secret gets the new expiry and an earlier one is kept.
-- name: signing_secret_expire_live
UPDATE signing_secrets
SET expires_at = least(
    expires_at, coalesce(:now::timestamptz, now()) + make_interval(secs => :overlap_seconds))
WHERE tenant_id = :tenant_id
  AND (expires_at IS NULL OR expires_at > coalesce(:now::timestamptz, now()));
