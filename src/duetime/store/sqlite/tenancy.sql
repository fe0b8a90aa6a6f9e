-- Tenants, API keys and signing secrets (plans in duetime/store/core/tenancy.py).

-- name: tenant_insert
INSERT INTO tenants (id, name, created_at) VALUES (:id, :name, :now)
RETURNING *;

-- name: tenant_get
SELECT * FROM tenants WHERE id = :id;

-- name: tenant_list
SELECT * FROM tenants ORDER BY created_at, id;

-- name: tenant_quotas_put
UPDATE tenants
SET max_pending_tasks = :max_pending_tasks, max_creates_per_second = :max_creates_per_second,
    max_concurrency = :max_concurrency, max_schedules = :max_schedules, weight = :weight,
    create_tokens = NULL, create_tokens_at = NULL
WHERE id = :id
RETURNING *;

-- What counts against the quotas, for each of :ids: tasks not ended (from the maintained
-- counters) and live schedules.
-- name: tenant_usage
SELECT
    t.value AS id,
    (SELECT coalesce(sum(n), 0) FROM task_counts
     WHERE tenant_id = t.value
       AND status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running')) AS pending_tasks,
    (SELECT count(*) FROM schedules WHERE tenant_id = t.value AND deleted = 0) AS schedules
FROM json_each(:ids) AS t;

-- name: tenant_delete
DELETE FROM tenants WHERE id = :id;

-- name: tenant_queues_delete
DELETE FROM queues WHERE tenant_id = :id;

-- The create-rate bucket, read under the write lock (BEGIN IMMEDIATE).
-- name: tenant_bucket_lock
SELECT max_creates_per_second AS rate, create_tokens AS tokens, create_tokens_at AS tokens_at,
       :now AS now
FROM tenants WHERE id = :id;

-- name: tenant_bucket_put
UPDATE tenants SET create_tokens = :tokens, create_tokens_at = :at WHERE id = :id;

-- name: api_key_insert
INSERT INTO api_keys (id, tenant_id, key_hash, created_at)
VALUES (:id, :tenant_id, :key_hash, :now)
RETURNING id, tenant_id, key_hash, created_at;

-- name: api_key_get_by_hash
SELECT id, tenant_id, key_hash, created_at FROM api_keys WHERE key_hash = :key_hash;

-- name: api_key_delete
DELETE FROM api_keys WHERE id = :id;

-- name: signing_secret_insert
INSERT INTO signing_secrets (id, tenant_id, secret, created_at, expires_at)
VALUES (:id, :tenant_id, :secret, :now, NULL);

-- Live secrets, oldest first (rowid breaks ties between secrets made at one pinned instant).
-- name: signing_secret_list_live
SELECT id, tenant_id, secret, created_at, expires_at
FROM signing_secrets
WHERE tenant_id = :tenant_id AND (expires_at IS NULL OR expires_at > :now)
ORDER BY created_at, rowid;

-- Every live secret expires :overlap_seconds from now, unless it already expires earlier.
-- name: signing_secret_expire_live
UPDATE signing_secrets
SET expires_at = min(
    coalesce(expires_at, :now + CAST(round(:overlap_seconds * 1000000) AS INTEGER)),
    :now + CAST(round(:overlap_seconds * 1000000) AS INTEGER))
WHERE tenant_id = :tenant_id AND (expires_at IS NULL OR expires_at > :now);
