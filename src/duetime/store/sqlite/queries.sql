-- The SQLite store's named queries. Each block starts with "-- name: <name>" and is loaded into
-- duetime.store.sqlite.queries.QUERIES. Times are INTEGER microseconds since the epoch (UTC);
-- ":now" is always the store's now, computed once per transaction by the caller.
--
-- Variable-length lists (ids, statuses, labels) are bound as ONE JSON text parameter and unpacked
-- with json_each(), so no statement text ever depends on the input.

-- ---------------------------------------------------------------------------------------------
-- migrations

-- name: ping
SELECT 1;

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- ---------------------------------------------------------------------------------------------
-- tenancy

-- Live secrets, oldest first (rowid breaks ties between secrets made at one pinned instant).
-- Every other live secret expires at :expires_at, unless it already expires earlier.
-- Take the row when it is free, expired, or already ours; RETURNING is empty when someone else
-- holds a live lease (the DO UPDATE's WHERE is false).
-- name: leader_elect
INSERT INTO leaders (name, node_id, expires_at) VALUES (:name, :node_id, :expires_at)
ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at
WHERE leaders.node_id = excluded.node_id OR leaders.expires_at <= :now
RETURNING node_id;

-- name: leader_resign
DELETE FROM leaders WHERE name = :name AND node_id = :node_id;

-- ---------------------------------------------------------------------------------------------
-- tasks: creation

-- ---------------------------------------------------------------------------------------------
-- tasks: reading

-- name: task_get
SELECT * FROM tasks WHERE tenant_id = :tenant_id AND id = :id;

-- ":cursor" is never NULL (the caller passes a value above every id for the first page), so the
-- (tenant_id, id DESC) index serves it as a range. Labels: every wanted key/value pair must exist.
-- name: task_list
SELECT * FROM tasks
WHERE tenant_id = :tenant_id
  AND id < :cursor
  AND (:queue IS NULL OR queue = :queue)
  AND (:name IS NULL OR name = :name)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:run_after IS NULL OR run_at >= :run_after)
  AND (:run_before IS NULL OR run_at < :run_before)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(tasks.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
ORDER BY id DESC
LIMIT :limit;

-- The same, for one status: (tenant_id, status, id DESC) serves both filter and order.
-- name: task_list_one_status
SELECT * FROM tasks
WHERE tenant_id = :tenant_id
  AND status = :status
  AND id < :cursor
  AND (:queue IS NULL OR queue = :queue)
  AND (:name IS NULL OR name = :name)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:run_after IS NULL OR run_at >= :run_after)
  AND (:run_before IS NULL OR run_at < :run_before)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(tasks.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
ORDER BY id DESC
LIMIT :limit;

-- The same, for several statuses (walks the tenant's tasks newest first).
-- name: task_list_by_status
SELECT * FROM tasks
WHERE tenant_id = :tenant_id
  AND status IN (SELECT value FROM json_each(:statuses))
  AND id < :cursor
  AND (:queue IS NULL OR queue = :queue)
  AND (:name IS NULL OR name = :name)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:run_after IS NULL OR run_at >= :run_after)
  AND (:run_before IS NULL OR run_at < :run_before)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(tasks.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
ORDER BY id DESC
LIMIT :limit;

-- name: attempt_list
SELECT * FROM attempts WHERE task_id = :task_id ORDER BY number;

-- ---------------------------------------------------------------------------------------------
-- tasks: changes asked for through the API (each conditional on the status just read)

-- name: task_update
UPDATE tasks SET
    run_at = coalesce(:run_at, run_at),
    due_at = coalesce(:run_at, due_at),
    status = :new_status,
    payload = coalesce(:payload, payload),
    priority = coalesce(:priority, priority),
    labels = coalesce(:labels, labels),
    version = version + 1,
    updated_at = :now
WHERE id = :id AND status = :old_status AND version = :version
RETURNING *;

-- name: task_cancel_waiting
UPDATE tasks SET status = 'cancelled', version = version + 1, updated_at = :now,
    finished_at = :now
WHERE id = :id AND status IN ('scheduled', 'blocked', 'ready', 'retrying')
RETURNING *;

-- A running task is cancelled when its attempt ends (see task_finish).
-- name: task_cancel_running
UPDATE tasks SET cancel_requested = 1, version = version + 1, updated_at = :now
WHERE id = :id AND status = 'running'
RETURNING *;

-- A dead-letter replay: a new attempt series, due now.
-- name: task_retry
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now, due_at = :now,
    series_start = attempts, last_error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = 0, lease_id = NULL, lease_expires_at = NULL
WHERE id = :id AND tenant_id = :tenant_id AND status IN ('failed', 'cancelled')
RETURNING *;

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

-- Parents failed or were cancelled: every blocked descendant fails (a dependent that is not
-- blocked has already been released or ended, and so shields its own dependents).
-- name: task_fail_dependents
WITH RECURSIVE doomed (id) AS (
    SELECT d.child_id
    FROM task_deps AS d JOIN tasks AS c ON c.id = d.child_id
    WHERE d.parent_id IN (SELECT value FROM json_each(:parent_ids)) AND c.status = 'blocked'
    UNION
    SELECT d.child_id
    FROM doomed JOIN task_deps AS d ON d.parent_id = doomed.id
    JOIN tasks AS c ON c.id = d.child_id
    WHERE c.status = 'blocked'
)
UPDATE tasks SET
    status = 'failed',
    version = version + 1,
    updated_at = :now,
    finished_at = :now,
    last_error = 'a task it depends on failed or was cancelled'
WHERE id IN (SELECT id FROM doomed) AND status = 'blocked'
RETURNING id;

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
