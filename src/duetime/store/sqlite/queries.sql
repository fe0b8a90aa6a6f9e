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

-- Positional, in the order of duetime.store.sqlite.tasks_api.INSERT_COLUMNS.
-- name: task_insert
INSERT INTO tasks (
    id, tenant_id, name, queue, status, version, target_type, target, payload, idempotency_key,
    priority, retry, timeout_seconds, depends_on, pending_parents, has_dependents,
    concurrency_key, labels, attempts, series_start, schedule_id, scheduled_for, run_at, due_at,
    created_at, updated_at, started_at, finished_at, last_error, result, lease_id,
    lease_expires_at, worker_id, cancel_requested, traceparent, request_hash, payload_ref
) VALUES (
    ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
    ?, ?, ?, ?, ?, ?,
    ?, ?, ?, ?, ?, ?, ?, ?,
    ?, ?, ?, ?, ?, ?, ?,
    ?, ?, ?, ?, ?, ?
);

-- name: task_find_by_idempotency_keys
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: task_parent_states
SELECT id, tenant_id, status FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: task_dep_insert
INSERT OR IGNORE INTO task_deps (parent_id, child_id) VALUES (?, ?);

-- name: task_mark_has_dependents
UPDATE tasks SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_dependents = 0;

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

-- The WHERE text matches the tasks_due partial index exactly, so SQLite can use it.
-- name: task_promote_due
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status IN ('scheduled', 'retrying') AND due_at <= :now
    ORDER BY due_at
    LIMIT :limit);

-- name: task_due_ids
-- The promoter's isolation path (see duetime.store.isolation): the ids task_promote_due takes.
SELECT id FROM tasks
WHERE status IN ('scheduled', 'retrying') AND due_at <= :now
ORDER BY due_at
LIMIT :limit;

-- name: task_promote
UPDATE tasks SET status = 'ready', version = version + 1, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('scheduled', 'retrying') AND due_at <= :now;

-- name: task_next_due_at
SELECT min(due_at) AS due_at FROM tasks WHERE status IN ('scheduled', 'retrying');

-- Claims: one UPDATE picks and leases the tasks. RETURNING gives rows in no particular order, so
-- the caller sorts them again (priority DESC, due_at, rowid). duetime_uuid() is a function the
-- store registers on its connection (a random UUID per row). ":lease_us" NULL = the task's own
-- timeout plus ":grace_us".
-- name: task_claim_push
UPDATE tasks SET
    status = 'running', version = version + 1, attempts = attempts + 1,
    lease_id = duetime_uuid(),
    lease_expires_at = :now + coalesce(:lease_us, CAST(round(timeout_seconds * 1000000) AS INTEGER)
                                                  + :grace_us),
    started_at = :now, finished_at = NULL, updated_at = :now, worker_id = :worker_id
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status = 'ready' AND target_type <> 'worker'
      AND target_type IN (SELECT value FROM json_each(:types))
      AND (:queue IS NULL OR queue = :queue)
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
      AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
          SELECT 1 FROM queues AS q
          WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
            AND (q.paused OR q.max_concurrency IS NOT NULL))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- One tenant's queue: the lease API, via tasks_ready_worker.
-- name: task_claim_worker_queue
UPDATE tasks SET
    status = 'running', version = version + 1, attempts = attempts + 1,
    lease_id = duetime_uuid(),
    lease_expires_at = :now + coalesce(:lease_us, CAST(round(timeout_seconds * 1000000) AS INTEGER)
                                                  + :grace_us),
    started_at = :now, finished_at = NULL, updated_at = :now, worker_id = :worker_id
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status = 'ready' AND target_type = 'worker'
      AND tenant_id = :tenant_id AND queue = :queue
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
      AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
          SELECT 1 FROM queues AS q
          WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
            AND (q.paused OR q.max_concurrency IS NOT NULL))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- Any mix of target types, any queue. No single partial index fits, so each kind of target
-- reads its own (push / worker) and the two ordered streams are merged.
-- name: task_claim_any
UPDATE tasks SET
    status = 'running', version = version + 1, attempts = attempts + 1,
    lease_id = duetime_uuid(),
    lease_expires_at = :now + coalesce(:lease_us, CAST(round(timeout_seconds * 1000000) AS INTEGER)
                                                  + :grace_us),
    started_at = :now, finished_at = NULL, updated_at = :now, worker_id = :worker_id
WHERE rowid IN (
    SELECT rid FROM (
        SELECT rowid AS rid, priority, due_at FROM tasks
        WHERE status = 'ready' AND target_type <> 'worker'
          AND target_type IN (SELECT value FROM json_each(:types))
          AND (:queue IS NULL OR queue = :queue)
          AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
          AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
          AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
              SELECT 1 FROM queues AS q
              WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
                AND (q.paused OR q.max_concurrency IS NOT NULL))
        UNION ALL
        SELECT rowid AS rid, priority, due_at FROM tasks
        WHERE status = 'ready' AND target_type = 'worker'
          AND 'worker' IN (SELECT value FROM json_each(:types))
          AND (:queue IS NULL OR queue = :queue)
          AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
          AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
          AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
              SELECT 1 FROM queues AS q
              WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
                AND (q.paused OR q.max_concurrency IS NOT NULL))
    )
    ORDER BY priority DESC, due_at, rid
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- End attempts, fenced on (running, lease_id): one statement for a batch. :batch is a JSON array
-- of [task_id, lease_id, ok, delay_us, result, error]; the caller makes task ids unique within
-- one statement. The next status: succeeded on success; else cancelled when a cancel was
-- requested; else retrying when a delay was given; else failed. SET expressions see the old row,
-- so the "retrying" test is spelled out where it matters.
-- name: task_finish
UPDATE tasks SET
    status = CASE
        WHEN c.ok THEN 'succeeded'
        WHEN tasks.cancel_requested THEN 'cancelled'
        WHEN c.delay_us IS NOT NULL THEN 'retrying'
        ELSE 'failed' END,
    due_at = CASE
        WHEN NOT c.ok AND NOT tasks.cancel_requested AND c.delay_us IS NOT NULL
        THEN :now + c.delay_us
        ELSE tasks.due_at END,
    finished_at = CASE
        WHEN NOT c.ok AND NOT tasks.cancel_requested AND c.delay_us IS NOT NULL THEN NULL
        ELSE :now END,
    result = CASE WHEN c.ok THEN c.result ELSE tasks.result END,
    last_error = CASE WHEN c.ok THEN tasks.last_error ELSE c.error END,
    lease_id = NULL,
    lease_expires_at = NULL,
    version = tasks.version + 1,
    updated_at = :now
FROM (
    SELECT value ->> 0 AS id, value ->> 1 AS lease_id, value ->> 2 AS ok,
           value ->> 3 AS delay_us, value ->> 4 AS result, value ->> 5 AS error,
           value ->> 6 AS expiry
    FROM json_each(:batch)
) AS c
WHERE tasks.id = c.id AND tasks.status = 'running' AND tasks.lease_id = c.lease_id
  -- The reaper's lease_expired ending counts only if the lease is still expired: a heartbeat
  -- that landed after the reaper read it wins.
  AND (NOT c.expiry OR tasks.lease_expires_at <= :now)
RETURNING tasks.id, tasks.status, tasks.attempts, tasks.has_dependents;

-- Positional: task_id, number, started_at, finished_at, outcome, error, http_status, duration_ms,
-- worker.
-- name: attempt_insert
INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error, http_status,
                      duration_ms, worker)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (task_id, number) DO NOTHING;

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

-- Heartbeat: only a live lease is extended; once expired it belongs to the reaper.
-- name: task_heartbeat
UPDATE tasks SET lease_expires_at = :expires_at
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND lease_expires_at > :now
RETURNING lease_id, lease_expires_at;

-- name: task_expired_leases
SELECT * FROM tasks
WHERE status = 'running' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit;

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
