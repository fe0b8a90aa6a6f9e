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
-- tasks: the engine's side

-- A parent succeeded: each blocked child has one parent fewer to wait for, and with none left it
-- is ready (or scheduled, when its run_at is still ahead).
-- name: task_release_dependents
UPDATE tasks SET
    pending_parents = pending_parents - 1,
    status = CASE
        WHEN pending_parents > 1 THEN 'blocked'
        WHEN due_at <= :now THEN 'ready'
        ELSE 'scheduled' END,
    version = version + 1,
    updated_at = :now
WHERE id IN (SELECT child_id FROM task_deps WHERE parent_id = :parent_id)
  AND status = 'blocked'
RETURNING status;

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
