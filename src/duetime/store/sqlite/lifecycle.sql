-- Schema bookkeeping (plans in duetime/store/core/migrations.py).

-- The write lock (BEGIN IMMEDIATE) already serializes migrating processes.
-- name: migrations_lock
SELECT 1;

-- name: schema_migrations_create
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     TEXT    NOT NULL PRIMARY KEY,
    applied_at  INTEGER NOT NULL
) STRICT;

-- name: schema_migrations_exists
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations';

-- name: schema_migrations_list
SELECT version FROM schema_migrations ORDER BY version;

-- name: schema_migrations_insert
INSERT INTO schema_migrations (version, applied_at) VALUES (:version, :now);
