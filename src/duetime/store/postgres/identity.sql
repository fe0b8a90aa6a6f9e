-- Signing keys, client certificates, held payloads and dashboard sessions (plans in
-- duetime/store/core/identity.py).

-- name: signing_key_list
SELECT * FROM signing_keys ORDER BY generation;

-- name: signing_key_insert
INSERT INTO signing_keys (kid, generation, algorithm, public_jwk, private_key, created_at,
                          signs_from)
VALUES (:kid, :generation, :algorithm, :public_jwk, :private_key, coalesce(:now::timestamptz, now()), :signs_from)
ON CONFLICT (generation) DO NOTHING;

-- name: signing_key_delete
DELETE FROM signing_keys WHERE kid = :kid;

-- name: client_certificate_put
INSERT INTO client_certificates (tenant_id, name, certificate, private_key, fingerprint, subject,
                                 not_after, created_at, updated_at)
VALUES (:tenant_id, :name, :certificate, :private_key, :fingerprint, :subject, :not_after,
        coalesce(:now::timestamptz, now()), coalesce(:now::timestamptz, now()))
ON CONFLICT (tenant_id, name) DO UPDATE
SET certificate = excluded.certificate, private_key = excluded.private_key,
    fingerprint = excluded.fingerprint, subject = excluded.subject,
    not_after = excluded.not_after, updated_at = excluded.updated_at
RETURNING *;

-- name: client_certificate_get
SELECT * FROM client_certificates WHERE tenant_id = :tenant_id AND name = :name;

-- name: client_certificate_list
SELECT * FROM client_certificates WHERE tenant_id = :tenant_id ORDER BY name;

-- name: client_certificate_delete
DELETE FROM client_certificates WHERE tenant_id = :tenant_id AND name = :name;

-- name: held_payload_insert
INSERT INTO held_payloads (id, tenant_id, payload, created_at)
VALUES (:id, :tenant_id, :payload, coalesce(:now::timestamptz, now()));

-- name: held_payload_link
UPDATE held_payloads SET task_id = :task_id::uuid WHERE id = :id AND tenant_id = :tenant_id;

-- name: held_payload_get
SELECT * FROM held_payloads WHERE id = :id AND tenant_id = :tenant_id;

-- name: held_payload_delete
DELETE FROM held_payloads WHERE id = :id;

-- Held payloads no task refers to: never linked (their create failed) since :before, or whose
-- task is gone (retention removed it).
-- name: held_payload_sweep
DELETE FROM held_payloads
WHERE id IN (
    SELECT id FROM held_payloads WHERE task_id IS NULL AND created_at < :before
    UNION ALL
    SELECT h.id FROM held_payloads AS h
    WHERE h.task_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tasks AS t WHERE t.id = h.task_id)
    LIMIT :limit
);

-- name: ui_session_insert
INSERT INTO ui_sessions (token_hash, tenant_id, key_id, created_at, last_seen, expires_at)
VALUES (:token_hash, :tenant_id, :key_id, coalesce(:now::timestamptz, now()),
        coalesce(:now::timestamptz, now()), :expires_at)
RETURNING *;

-- Sessions past their absolute or idle limit.
-- name: ui_session_delete_expired
DELETE FROM ui_sessions WHERE expires_at <= coalesce(:now::timestamptz, now()) OR last_seen <= :idle_since;

-- A live session: not past either limit, and a tenant session's key not deleted.
-- name: ui_session_get
SELECT s.* FROM ui_sessions AS s
WHERE s.token_hash = :token_hash AND s.expires_at > coalesce(:now::timestamptz, now()) AND s.last_seen > :idle_since
  AND (s.key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys AS k WHERE k.id = s.key_id));

-- name: ui_session_touch
UPDATE ui_sessions SET last_seen = coalesce(:now::timestamptz, now()) WHERE token_hash = :token_hash;

-- name: ui_session_delete
DELETE FROM ui_sessions WHERE token_hash = :token_hash;

-- name: ui_session_revoke_all
DELETE FROM ui_sessions;

-- name: ui_session_revoke_tenant
DELETE FROM ui_sessions WHERE tenant_id = :tenant_id;
