-- Schema bookkeeping (plans in duetime/store/core/migrations.py).

-- Held until the migrating transaction ends: a second node waits here, then finds nothing to do.
-- name: migrations_lock
SELECT pg_advisory_xact_lock(hashtextextended('duetime:migrate', 0));

-- name: schema_migrations_create
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL
);

-- name: schema_migrations_exists
SELECT to_regclass('schema_migrations') IS NOT NULL;

-- name: schema_migrations_list
SELECT version FROM schema_migrations ORDER BY version;

-- name: schema_migrations_insert
INSERT INTO schema_migrations (version, applied_at) VALUES (:version, now());
