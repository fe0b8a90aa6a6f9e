-- The SQLite store's named queries. Each block starts with "-- name: <name>" and is loaded into
-- duetime.store.sqlite.queries.QUERIES. Times are INTEGER microseconds since the epoch (UTC);
-- ":now" is always the store's now, computed once per transaction by the caller.
--
-- Variable-length lists (ids, statuses, labels) are bound as ONE JSON text parameter and unpacked
-- with json_each(), so no statement text ever depends on the input.

-- ---------------------------------------------------------------------------------------------
-- migrations

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- ---------------------------------------------------------------------------------------------
-- transactions

-- Writers take the write lock up front, so a read-then-write inside one transaction cannot race
-- another writer (even one in another process) and never fails half-way with SQLITE_BUSY.
-- name: begin_immediate
BEGIN IMMEDIATE;

-- name: begin_read
BEGIN DEFERRED;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;
