-- Tenants, API keys and signing secrets (plans in duetime/store/core/tenancy.py).

-- name: tenant_insert
INSERT INTO tenants (id, name, created_at)
VALUES (:id, :name, coalesce(:now::timestamptz, now()))
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

-- What counts against the quotas, for each of :ids: tasks not ended (the maintained counters
-- plus the deltas not folded yet) and live schedules.
-- name: tenant_usage
SELECT
    t.id,
    (SELECT coalesce(sum(n), 0) FROM task_counts
     WHERE tenant_id = t.id
       AND status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running'))
  + (SELECT coalesce(sum(delta), 0) FROM task_count_deltas
     WHERE tenant_id = t.id
       AND status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running')) AS pending_tasks,
    (SELECT count(*) FROM schedules WHERE tenant_id = t.id AND NOT deleted) AS schedules
FROM unnest(:ids::text[]) AS t (id);

-- name: tenant_delete
DELETE FROM tenants WHERE id = :id;

-- name: tenant_queues_delete
DELETE FROM queues WHERE tenant_id = :id;

-- The create-rate bucket, locked: creates of one rate-limited tenant serialize across nodes.
-- name: tenant_bucket_lock
SELECT max_creates_per_second AS rate, create_tokens AS tokens, create_tokens_at AS tokens_at,
       coalesce(:now::timestamptz, now()) AS now
FROM tenants WHERE id = :id
FOR UPDATE;

-- name: tenant_bucket_put
UPDATE tenants SET create_tokens = :tokens, create_tokens_at = :at WHERE id = :id;

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
