-- The SQLite store's batch strategy for create, claim and complete (duetime/store/sqlite/hot.py):
-- one writer, so a batch is a few statements (executemany for rows) in one write transaction.
-- Times are INTEGER microseconds; lists are one JSON text parameter.

-- name: task_insert
INSERT INTO tasks (
    id, tenant_id, name, queue, status, version, target_type, target, payload, idempotency_key,
    priority, retry, timeout_seconds, depends_on, pending_parents, has_dependents,
    concurrency_key, labels, attempts, series_start, schedule_id, scheduled_for, run_at, due_at,
    created_at, updated_at, finished_at, last_error, cancel_requested, traceparent, request_hash,
    payload_ref, flow_key
) VALUES (
    :id, :tenant_id, :name, :queue, :status, 1, :target_type, :target, :payload,
    :idempotency_key, :priority, :retry, :timeout_seconds, :depends_on, :pending_parents, 0,
    :concurrency_key, :labels, 0, 0, :schedule_id, :scheduled_for, :run_at, :run_at,
    :now, :now, :finished_at, :last_error, 0, :traceparent, :request_hash, :payload_ref,
    :flow_key
);

-- name: task_find_by_idempotency_keys
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: task_parent_states
SELECT id, tenant_id, status FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: task_dep_insert
INSERT OR IGNORE INTO task_deps (parent_id, child_id) VALUES (:parent_id, :child_id);

-- name: task_mark_has_dependents
UPDATE tasks SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_dependents = 0;

-- Claims: one UPDATE picks and leases the tasks. RETURNING gives rows in no particular order, so
-- the caller sorts them again (priority DESC, due_at, rowid). duetime_uuid() is a function the
-- store registers on its connection (a random UUID per row). ":lease_us" NULL = the task's own
-- timeout plus ":grace_us". Every claim below is this UPDATE over its own pick.
-- fragment: claim_lease
UPDATE tasks SET
    status = 'running', version = version + 1, attempts = attempts + 1,
    lease_id = duetime_uuid(),
    lease_expires_at = :now + coalesce(:lease_us, CAST(round(timeout_seconds * 1000000) AS INTEGER)
                                                  + :grace_us),
    started_at = :now, finished_at = NULL, updated_at = :now, worker_id = :worker_id
WHERE rowid IN

-- fragment: claimable_queue
-- Claims skip tasks of paused and limited queues (limited ones: queue by queue, below).
AND NOT EXISTS (
    SELECT 1 FROM queues AS q
    WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
      AND (q.paused OR q.limited OR q.key_rate IS NOT NULL))

-- fragment: claimable_this_queue
-- The same test for a claim of one tenant's queue, asked once of the request's own names (as
-- PostgreSQL's, where joining it to every candidate misled the planner).
AND NOT EXISTS (
    SELECT 1 FROM queues AS q
    WHERE q.tenant_id = :tenant_id AND q.name = :queue
      AND (q.paused OR q.limited OR q.key_rate IS NOT NULL))

-- The next (tenant, queue) after (:after_tenant, :after_queue) with ready push tasks, its
-- tenant's weight, and whether the queue holds its tasks back (paused or limited): one probe of
-- tasks_ready_push's first two columns. The caller steps through them all (a skip scan: one
-- probe per (tenant, queue), however long its backlog).
-- name: ready_push_queue_next
SELECT tenant_id, queue,
       coalesce((SELECT weight FROM tenants WHERE id = tasks.tenant_id), 1) AS weight,
       EXISTS (SELECT 1 FROM queues AS q
               WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
                 AND (q.paused OR q.limited OR q.key_rate IS NOT NULL)) AS held
FROM tasks
WHERE status = 'ready' AND target_type <> 'worker'
  AND (tenant_id, queue) > (:after_tenant, :after_queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR queue = :queue)
  AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
ORDER BY tenant_id, queue
LIMIT 1;

-- Push targets (the dispatcher) of one tenant's queue, via tasks_ready_push: the tenant's share
-- when it is its only queue with ready work. Pairs come from ready_push_queue_next in the same
-- write transaction, so the queue is known to be claimable.
-- name: task_claim_push
-- include: claim_lease
    (SELECT rowid FROM tasks
    WHERE status = 'ready' AND target_type <> 'worker'
      AND tenant_id = :tenant_id AND queue = :queue
      AND target_type IN (SELECT value FROM json_each(:types))
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- A tenant with several queues: up to its share from each (this, per queue), merged by the
-- caller in claim order, then task_claim_rowids.
-- name: task_ready_push_pick
SELECT rowid, priority, due_at FROM tasks
WHERE status = 'ready' AND target_type <> 'worker'
  AND tenant_id = :tenant_id AND queue = :queue
  AND target_type IN (SELECT value FROM json_each(:types))
  AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
ORDER BY priority DESC, due_at
LIMIT :limit;

-- name: task_claim_rowids
-- include: claim_lease
    (SELECT value FROM json_each(:rowids))
RETURNING *, rowid AS claim_rowid;

-- One tenant's queue: the lease API, via tasks_ready_worker.
-- name: task_claim_worker
-- include: claim_lease
    (SELECT rowid FROM tasks
    WHERE status = 'ready' AND target_type = 'worker'
      AND tenant_id = :tenant_id AND queue = :queue
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
      -- include: claimable_this_queue
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- Any mix of target types, any queue. No single partial index fits, so each kind of target
-- reads its own (push / worker) and the two ordered streams are merged.
-- name: task_claim_any
-- include: claim_lease
    (SELECT rid FROM (
        SELECT rowid AS rid, priority, due_at FROM tasks
        WHERE status = 'ready' AND target_type <> 'worker'
          AND target_type IN (SELECT value FROM json_each(:types))
          AND (:queue IS NULL OR queue = :queue)
          AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
          AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
          AND tenant_id NOT IN (SELECT value FROM json_each(:exclude))
          -- include: claimable_queue
        UNION ALL
        SELECT rowid AS rid, priority, due_at FROM tasks
        WHERE status = 'ready' AND target_type = 'worker'
          AND 'worker' IN (SELECT value FROM json_each(:types))
          AND (:queue IS NULL OR queue = :queue)
          AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
          AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
          AND tenant_id NOT IN (SELECT value FROM json_each(:exclude))
          -- include: claimable_queue
    )
    ORDER BY priority DESC, due_at, rid
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- Limited queues a claim may take from. The claim statements above skip them; the caller claims
-- from each within its room, in the same write transaction.
-- Tenants with a max_concurrency quota, and their room: the quota less their running tasks.
-- name: tenant_rooms
SELECT t.id, t.max_concurrency - (
    SELECT count(*) FROM tasks WHERE tenant_id = t.id AND status = 'running') AS room
FROM tenants AS t
WHERE t.max_concurrency IS NOT NULL AND (:tenant_id IS NULL OR t.id = :tenant_id);

-- name: queue_limited
SELECT tenant_id, name, max_concurrency, rate_limit_per_second, burst, max_concurrency_per_key,
       tokens, tokens_at, key_rate, key_burst
FROM queues
WHERE (limited OR key_rate IS NOT NULL) AND paused = 0
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR name = :queue)
  AND tenant_id NOT IN (SELECT value FROM json_each(:exclude))
ORDER BY tenant_id, name;

-- name: queue_tokens_put
-- The bucket's time never goes back (as on PostgreSQL).
UPDATE queues SET tokens = :tokens, tokens_at = max(coalesce(tokens_at, :now), :now)
WHERE tenant_id = :tenant_id AND name = :queue;

-- name: queue_running
SELECT count(*) AS n FROM tasks
WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue;

-- Worker tasks of one tenant's limited queue, via tasks_ready_worker.
-- name: task_claim_limited_worker
-- include: claim_lease
    (SELECT rowid FROM tasks
    WHERE status = 'ready' AND target_type = 'worker'
      AND tenant_id = :tenant_id AND queue = :queue
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- Any target types of one tenant's limited queue (the dispatcher's side).
-- name: task_claim_limited
-- include: claim_lease
    (SELECT rowid FROM tasks
    WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue
      AND target_type IN (SELECT value FROM json_each(:types))
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- A queue with max_concurrency_per_key (any target types): a task whose concurrency_key already
-- has :per_key running, or earlier ready ones filling the rest, waits; tasks without a key are
-- not bound. Each key's tasks go in priority, due, creation order, so with 1 they run serially.
-- Reads every ready task of the queue (the window needs them all).
-- name: task_claim_keyed
-- include: claim_lease
    (SELECT r.rid FROM (
        SELECT rowid AS rid, priority, due_at, concurrency_key,
               target_type IN (SELECT value FROM json_each(:types))
                   AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
                   AS wanted,
               row_number() OVER (PARTITION BY concurrency_key
                                  ORDER BY priority DESC, due_at, created_at, rowid) AS rank
        FROM tasks
        WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue
    ) AS r
    LEFT JOIN (
        SELECT concurrency_key, count(*) AS n FROM tasks
        WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue
          AND concurrency_key IS NOT NULL
        GROUP BY concurrency_key
    ) AS b ON b.concurrency_key = r.concurrency_key
    WHERE r.wanted AND (r.concurrency_key IS NULL OR coalesce(b.n, 0) + r.rank <= :per_key)
    ORDER BY r.priority DESC, r.due_at, r.rank, r.rid
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- End attempts, fenced on (running, lease_id): one statement for a batch. :batch is a JSON array
-- of [task_id, lease_id, status, delay_us, result, error, expiry]; the caller makes task ids
-- unique within one statement. The status is the one its ending decided
-- (duetime.lifecycle.finish); the one rule applied here is the cancel-requested override
-- (duetime.states.after_cancel_request), read under the fence, and the clock's arithmetic for a
-- retry's due time. SET expressions see the old row, so the override is spelled out where it
-- matters.
-- name: task_finish
UPDATE tasks SET
    status = CASE WHEN tasks.cancel_requested AND c.status <> 'succeeded' THEN 'cancelled'
                  ELSE c.status END,
    due_at = CASE
        WHEN c.status = 'retrying' AND NOT tasks.cancel_requested THEN :now + c.delay_us
        ELSE tasks.due_at END,
    finished_at = CASE
        WHEN c.status = 'retrying' AND NOT tasks.cancel_requested THEN NULL
        ELSE :now END,
    result = CASE WHEN c.status = 'succeeded' THEN c.result ELSE tasks.result END,
    last_error = CASE WHEN c.status = 'succeeded' THEN tasks.last_error ELSE c.error END,
    lease_id = NULL,
    lease_expires_at = NULL,
    version = tasks.version + 1,
    updated_at = :now
FROM (
    SELECT value ->> 0 AS id, value ->> 1 AS lease_id, value ->> 2 AS status,
           value ->> 3 AS delay_us, value ->> 4 AS result, value ->> 5 AS error,
           value ->> 6 AS expiry
    FROM json_each(:batch)
) AS c
WHERE tasks.id = c.id AND tasks.status = 'running' AND tasks.lease_id = c.lease_id
  -- The reaper's lease_expired ending counts only if the lease is still expired: a heartbeat
  -- that landed after the reaper read it wins.
  AND (NOT c.expiry OR tasks.lease_expires_at <= :now)
RETURNING tasks.id, tasks.status, tasks.attempts, tasks.has_dependents,
    EXISTS (SELECT 1 FROM queues AS q
            WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
              AND (q.limited OR q.key_rate IS NOT NULL))
    OR EXISTS (SELECT 1 FROM tenants AS tn
               WHERE tn.id = tasks.tenant_id AND tn.max_concurrency IS NOT NULL) AS freed;

-- name: attempt_insert
INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error, http_status,
                      duration_ms, worker, logs, response)
VALUES (:task_id, :number, :started_at, :now, :outcome, :error, :http_status, :duration_ms,
        :worker, :logs, :response)
ON CONFLICT (task_id, number) DO NOTHING;
