-- Named credentials and the rows that hold sealed values (plans in
-- duetime/store/core/credentials.py).

-- name: credential_put
INSERT INTO credentials (tenant_id, name, kind, secret, created_at, updated_at)
VALUES (:tenant_id, :name, :kind, :secret, :now, :now)
ON CONFLICT (tenant_id, name) DO UPDATE
    SET kind = excluded.kind, secret = excluded.secret, updated_at = excluded.updated_at
RETURNING *;

-- name: credential_count
SELECT count(*) FROM credentials WHERE tenant_id = :tenant_id;

-- name: credential_get
SELECT * FROM credentials WHERE tenant_id = :tenant_id AND name = :name;

-- name: credential_list
SELECT * FROM credentials WHERE tenant_id = :tenant_id ORDER BY name;

-- name: credential_delete
DELETE FROM credentials WHERE tenant_id = :tenant_id AND name = :name;

-- Rows that may hold a credential, in key order after :after_key (NULL: from the start): a
-- sealed value anywhere, or a push target whose URL has user info or a query, or that has
-- headers (one stored before sealing existed). The plan decides what to write back.
-- name: sealed_page_tasks
SELECT id AS key, tenant_id, target AS raw FROM tasks
WHERE id > coalesce(:after_key, '') AND target_type <> 'worker'
  AND (instr(target, 'dtenc') > 0
       OR instr(coalesce(json_extract(target, '$.url'), ''), '@') > 0
       OR instr(coalesce(json_extract(target, '$.url'), ''), '?') > 0
       OR coalesce(json_extract(target, '$.headers'), '{}') <> '{}')
ORDER BY id
LIMIT :limit;

-- name: sealed_page_schedules
SELECT id AS key, tenant_id, task AS raw FROM schedules
WHERE id > coalesce(:after_key, '')
ORDER BY id
LIMIT :limit;

-- name: sealed_page_notifications
SELECT tenant_id AS key, tenant_id, target AS raw FROM tenant_notifications
WHERE tenant_id > coalesce(:after_key, '')
ORDER BY tenant_id
LIMIT :limit;

-- name: sealed_page_credentials
SELECT name AS key, tenant_id, secret AS raw FROM credentials
WHERE (tenant_id, name) > (coalesce(:after_tenant, ''), coalesce(:after_key, ''))
ORDER BY tenant_id, name
LIMIT :limit;

-- The node's own sealed text (sealed for no tenant): OIDC signing keys' private halves and
-- tenants' TLS client certificate keys.
-- name: sealed_page_signing_keys
SELECT kid AS key, '' AS tenant_id, private_key AS raw FROM signing_keys
WHERE kid > coalesce(:after_key, '')
ORDER BY kid
LIMIT :limit;

-- name: sealed_page_client_certificates
SELECT name AS key, tenant_id, private_key AS raw FROM client_certificates
WHERE (tenant_id, name) > (coalesce(:after_tenant, ''), coalesce(:after_key, ''))
ORDER BY tenant_id, name
LIMIT :limit;

-- Each write is conditional on the text read: a row changed since is left for the next run.
-- name: sealed_replace_tasks
UPDATE tasks SET target = :new WHERE id = :key AND target = :old;

-- name: sealed_replace_schedules
UPDATE schedules SET task = :new WHERE id = :key AND task = :old;

-- name: sealed_replace_notifications
UPDATE tenant_notifications SET target = :new WHERE tenant_id = :key AND target = :old;

-- name: sealed_replace_credentials
UPDATE credentials SET secret = :new
WHERE tenant_id = :tenant_id AND name = :key AND secret = :old;

-- name: sealed_replace_signing_keys
UPDATE signing_keys SET private_key = :new WHERE kid = :key AND private_key = :old;

-- name: sealed_replace_client_certificates
UPDATE client_certificates SET private_key = :new
WHERE tenant_id = :tenant_id AND name = :key AND private_key = :old;
