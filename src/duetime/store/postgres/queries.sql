-- Named queries of the PostgreSQL store, loaded into a dict by duetime.store.postgres.sql.
--
-- Conventions:
--   * Statements are prepared and soon run with generic plans, blind to array sizes: rows are
--     found with "id = ANY(array)" (an index scan at any table size), never by joining a CTE or
--     unnest() to tasks, which a generic plan may turn into a hash join over a sequential scan.
--   * $1 is the pinned test time in every query that needs "now": every due/lease decision reads
--     coalesce($1::timestamptz, now()) so production trusts the database clock and tests pin it.
--   * Every state change is one UPDATE conditional on status (and lease_id for running tasks).
--   * No statement sends NOTIFY: a NOTIFY in a transaction holds a cluster-wide lock through
--     its commit, which serialized concurrent single creates (measured: 2-4x fewer per second).
--     The store wakes other nodes after commit instead, with one coalesced pg_notify
--     (see duetime.store.postgres.signals).

-- name: ping
SELECT 1;

-- name: now
SELECT coalesce($1::timestamptz, now());

-- name: notify
SELECT pg_notify($1, $2);

-- name: task_insert
-- $2 is a task_input[]. Status is decided here, by the store's clock. dep_failed and
-- pending_parents come from the parents, which the caller has locked in the same transaction.
INSERT INTO tasks AS t (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, schedule_id,
    scheduled_for, run_at, due_at, created_at, updated_at, finished_at, last_error,
    cancel_requested, traceparent, request_hash, payload_ref)
SELECT
    i.id, i.tenant_id, i.name, i.queue,
    CASE WHEN i.dep_failed THEN 'failed'
         WHEN i.pending_parents > 0 THEN 'blocked'
         WHEN coalesce(i.run_at, c.now) <= c.now THEN 'ready'
         ELSE 'scheduled' END,
    1, i.target_type, i.target, i.payload, i.idempotency_key, i.priority, i.retry,
    i.timeout_seconds, i.depends_on, i.pending_parents, false, i.concurrency_key, i.labels,
    0, 0, i.schedule_id, i.scheduled_for, coalesce(i.run_at, c.now),
    coalesce(i.run_at, c.now), c.now, c.now,
    CASE WHEN i.dep_failed THEN c.now END,
    CASE WHEN i.dep_failed THEN 'a task it depends on failed or was cancelled' END,
    false, i.traceparent, i.request_hash, i.payload_ref
FROM unnest($2::task_input[]) AS i
CROSS JOIN (SELECT coalesce($1::timestamptz, now()) AS now) AS c
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
-- Only what the store decided: the caller builds the Task from its own input, which saves
-- sending (and parsing) every column of every new row back.
RETURNING t.id, t.status, t.run_at, t.due_at, t.created_at, t.finished_at, t.last_error;

-- name: task_select_by_idempotency_key
-- May return extra rows when a batch mixes tenants: the caller keeps the (tenant, key) pairs it
-- asked for. Plain = ANY keeps the unique index usable under a generic plan.
SELECT * FROM tasks WHERE tenant_id = ANY($1::text[]) AND idempotency_key = ANY($2::text[]);

-- name: task_parents_lock
-- Locking the parents (in id order, against deadlocks) makes a parent's completion wait for our
-- commit, so its dependents step sees our task_deps rows; or we wait and read its final status.
SELECT id, tenant_id, status, has_dependents FROM tasks
WHERE id = ANY($1::uuid[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: task_parents_mark
UPDATE tasks SET has_dependents = true WHERE id = ANY($1::uuid[]) AND NOT has_dependents;

-- name: task_deps_insert
INSERT INTO task_deps (parent_id, child_id)
SELECT * FROM unnest($1::uuid[], $2::uuid[])
ON CONFLICT DO NOTHING;

-- name: task_get
SELECT * FROM tasks WHERE id = $1 AND tenant_id = $2;

-- name: task_list
-- Newest first through tasks_tenant_idx; with a status filter, see task_list_by_status.
SELECT * FROM tasks
WHERE tenant_id = $1
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR name = $3)
  AND ($4::text IS NULL OR schedule_id = $4)
  AND labels @> $5::jsonb
  AND ($6::timestamptz IS NULL OR run_at >= $6)
  AND ($7::timestamptz IS NULL OR run_at < $7)
  AND ($8::uuid IS NULL OR id < $8)
ORDER BY id DESC
LIMIT $9;

-- name: task_list_by_status
-- The same with a status filter, through tasks_tenant_status_idx: a rare status (the failed
-- ones, the dead-letter set) is found without walking every task of the tenant.
SELECT * FROM tasks
WHERE tenant_id = $1
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR name = $3)
  AND ($4::text IS NULL OR schedule_id = $4)
  AND labels @> $5::jsonb
  AND ($6::timestamptz IS NULL OR run_at >= $6)
  AND ($7::timestamptz IS NULL OR run_at < $7)
  AND ($8::uuid IS NULL OR id < $8)
  AND status = ANY($10::text[])
ORDER BY id DESC
LIMIT $9;

-- name: task_update
-- A new run_at moves due_at; a waiting task follows it between scheduled and ready.
UPDATE tasks t SET
    run_at = coalesce($4::timestamptz, t.run_at),
    due_at = coalesce($4::timestamptz, t.due_at),
    status = CASE
        WHEN $4::timestamptz IS NULL OR t.status = 'blocked' THEN t.status
        WHEN $4::timestamptz <= coalesce($1::timestamptz, now()) THEN
            CASE WHEN t.status = 'scheduled' OR t.status = 'retrying' THEN 'ready'
                 ELSE t.status END
        ELSE 'scheduled' END,
    payload = coalesce($5::text, t.payload),
    priority = coalesce($6::int, t.priority),
    labels = coalesce($7::jsonb, t.labels),
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3
  AND t.status IN ('scheduled', 'blocked', 'ready', 'retrying')
RETURNING t.*;

-- name: task_cancel
-- A running task keeps running and ends cancelled with its attempt (see task_complete_many).
UPDATE tasks t SET
    status = CASE WHEN t.status = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = t.status = 'running',
    finished_at = CASE WHEN t.status = 'running' THEN NULL
                       ELSE coalesce($1::timestamptz, now()) END,
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3
  AND t.status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running')
RETURNING t.*;

-- name: task_retry
UPDATE tasks t SET
    status = 'ready',
    series_start = t.attempts,
    due_at = coalesce($1::timestamptz, now()),
    last_error = NULL,
    result = NULL,
    finished_at = NULL,
    cancel_requested = false,
    lease_id = NULL,
    lease_expires_at = NULL,
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = $2 AND t.tenant_id = $3 AND t.status IN ('failed', 'cancelled')
RETURNING t.*;

-- name: attempt_list
-- One row with a NULL number when the task exists without attempts; none when it is not ours.
SELECT t.id AS task_id, a.number, a.started_at, a.finished_at, a.outcome, a.error,
       a.http_status, a.duration_ms, a.worker
FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
WHERE t.id = $1 AND t.tenant_id = $2
ORDER BY a.number;

-- name: task_promote_due
WITH due AS (
    SELECT id FROM tasks
    WHERE status IN ('scheduled', 'retrying') AND due_at <= coalesce($1::timestamptz, now())
    ORDER BY due_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
upd AS (
    UPDATE tasks t SET
        status = 'ready',
        version = t.version + 1,
        updated_at = coalesce($1::timestamptz, now())
    WHERE t.id = ANY(ARRAY(SELECT id FROM due))
    RETURNING 1
)
SELECT count(*) FROM upd;

-- name: task_due_ids
-- The promoter's isolation path (see duetime.store.isolation): the ids task_promote_due takes.
SELECT id FROM tasks
WHERE status IN ('scheduled', 'retrying') AND due_at <= coalesce($1::timestamptz, now())
ORDER BY due_at
LIMIT $2;

-- name: task_promote
WITH upd AS (
    UPDATE tasks t SET
        status = 'ready',
        version = t.version + 1,
        updated_at = coalesce($1::timestamptz, now())
    WHERE t.id = ANY($2::uuid[])
      AND t.status IN ('scheduled', 'retrying') AND t.due_at <= coalesce($1::timestamptz, now())
    RETURNING 1
)
SELECT count(*) FROM upd;

-- name: task_next_due_at
SELECT min(due_at) FROM tasks WHERE status IN ('scheduled', 'retrying');

-- name: claim_in_index_order
-- Run before every task_claim_push, in its transaction. Statistics lag behind a burst: they
-- still say "nothing is ready" while thousands are, and the planner then reads the whole ready
-- set with a bitmap scan and sorts it for every claim (measured: 40 ms for 500 of 20,000 ready),
-- where a walk of tasks_ready_push_idx in its order stops after the first few hundred rows
-- (1.5 ms). Without sorts that walk is the only plan left. Every run, not some: a prepared
-- statement's cached plan keeps the settings it was planned under.
SET LOCAL enable_sort = off;

-- name: task_claim_push
-- Dispatcher. The literal target_type predicate lets even a generic plan use tasks_ready_push_idx.
-- $2 target types, $3 queue or NULL, $4 names or NULL, $5 limit, $6 lease seconds or NULL
-- (then the task's timeout + $7 grace), $8 worker id, $9 tenant or NULL.
WITH picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type <> 'worker'
      AND target_type = ANY($2::text[])
      AND ($3::text IS NULL OR queue = $3)
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
      AND ($9::text IS NULL OR tenant_id = $9)
      AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
          SELECT 1 FROM queues q
          WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
            AND (q.paused OR q.max_concurrency IS NOT NULL))
    ORDER BY priority DESC, due_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

-- name: task_claim_worker
-- Lease API: worker tasks of one tenant's ($9) queue ($3), via tasks_ready_worker_idx.
-- Parameters as above.
WITH picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = $9 AND queue = $3
      AND 'worker' = ANY($2::text[])
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
      AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
          SELECT 1 FROM queues q
          WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
            AND (q.paused OR q.max_concurrency IS NOT NULL))
    ORDER BY priority DESC, due_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

-- name: task_claim_any
-- Any mix of target types, any or one queue. Parameters as above.
WITH picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready'
      AND target_type = ANY($2::text[])
      AND ($3::text IS NULL OR queue = $3)
      AND ($4::text[] IS NULL OR name = ANY($4::text[]))
      AND ($9::text IS NULL OR tenant_id = $9)
      AND NOT EXISTS (  -- paused or limited queues (limited ones: see queues.py)
          SELECT 1 FROM queues q
          WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
            AND (q.paused OR q.max_concurrency IS NOT NULL))
    ORDER BY priority DESC, due_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce($1::timestamptz, now())
        + make_interval(secs => coalesce($6::float8, t.timeout_seconds + $7::float8)),
    worker_id = $8,
    started_at = coalesce($1::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING t.*;

-- name: task_complete_many
-- $2 is a task_completion[]. Fenced on (id, lease_id). The attempt rows are written by the
-- same statement.
WITH c AS (SELECT * FROM unnest($2::task_completion[])),
done AS (
    UPDATE tasks t SET
        status = CASE WHEN c.outcome = 'succeeded' THEN 'succeeded'
                      WHEN t.cancel_requested THEN 'cancelled'
                      WHEN c.retry_delay IS NOT NULL THEN 'retrying'
                      ELSE 'failed' END,
        due_at = CASE WHEN c.outcome <> 'succeeded' AND NOT t.cancel_requested
                           AND c.retry_delay IS NOT NULL
                      THEN coalesce($1::timestamptz, now()) + make_interval(secs => c.retry_delay)
                      ELSE t.due_at END,
        finished_at = CASE WHEN c.outcome <> 'succeeded' AND NOT t.cancel_requested
                                AND c.retry_delay IS NOT NULL THEN NULL
                           ELSE coalesce($1::timestamptz, now()) END,
        result = CASE WHEN c.outcome = 'succeeded' THEN c.result ELSE t.result END,
        last_error = CASE WHEN c.outcome = 'succeeded' THEN t.last_error ELSE c.error END,
        lease_id = NULL,
        lease_expires_at = NULL,
        version = t.version + 1,
        updated_at = coalesce($1::timestamptz, now())
    FROM c
    -- The lease is the fence: tasks_lease_is_running (a CHECK) makes a matching lease_id mean
    -- "running". No status filter on purpose: it would let the planner estimate the running
    -- tasks from statistics, which are often stale ("none running"), pick them as the outer
    -- side of a nested loop and re-run unnest() for each: quadratic. Without it, tasks are
    -- reached by primary key from each completion (or by one hash join on a small table).
    WHERE t.id = c.id AND t.lease_id = c.lease_id
      -- The reaper's lease_expired ending counts only if the lease is still expired: a
      -- heartbeat that landed after the reaper read it wins.
      AND (c.outcome <> 'lease_expired' OR t.lease_expires_at <= coalesce($1::timestamptz, now()))
    RETURNING t.id, c.lease_id, t.status, t.has_dependents, t.attempts, c.outcome,
              c.started_at, c.duration_ms, c.error, c.http_status, c.worker
),
att AS (
    INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error,
                          http_status, duration_ms, worker)
    SELECT d.id, d.attempts, d.started_at, coalesce($1::timestamptz, now()), d.outcome, d.error,
           d.http_status, d.duration_ms, d.worker
    FROM done d
    ON CONFLICT DO NOTHING
)
SELECT id, lease_id, status, has_dependents FROM done;

-- name: task_complete_leased
-- Lease API, succeeded attempts by lease id alone ($2 lease ids, $3 results, tenant $4): no read
-- of the tasks beforehand. Each lease is found by one probe of tasks_lease_id_idx and its task
-- then by primary key (as in task_heartbeat). The lease is the fence, as in task_complete_many;
-- tasks with dependents are left to that statement, which settles them in a transaction.
WITH l AS MATERIALIZED (
    SELECT x.id, l.lease_id, l.result
    FROM unnest($2::uuid[], $3::text[]) AS l (lease_id, result)
    CROSS JOIN LATERAL (
        SELECT id FROM tasks WHERE lease_id = l.lease_id AND status = 'running'
        ORDER BY lease_id LIMIT 1
    ) AS x
),
done AS (
    UPDATE tasks t SET
        status = 'succeeded',
        finished_at = coalesce($1::timestamptz, now()),
        result = l.result,
        lease_id = NULL,
        lease_expires_at = NULL,
        version = t.version + 1,
        updated_at = coalesce($1::timestamptz, now())
    FROM l
    WHERE t.id = l.id AND t.lease_id = l.lease_id AND t.tenant_id = $4 AND NOT t.has_dependents
      -- A worker id over the attempts' 256-byte limit is cut by the general path (recordable).
      AND octet_length(coalesce(t.worker_id, '')) <= 256
    RETURNING t.id, l.lease_id, t.queue, t.attempts, t.started_at, t.worker_id
),
att AS (
    INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error,
                          http_status, duration_ms, worker)
    SELECT d.id, d.attempts, coalesce(d.started_at, coalesce($1::timestamptz, now())),
           coalesce($1::timestamptz, now()), 'succeeded', NULL, NULL,
           greatest(0, extract(epoch FROM coalesce($1::timestamptz, now())
                                          - coalesce(d.started_at, coalesce($1::timestamptz, now()))
                               ) * 1000)::float8,
           d.worker_id
    FROM done d
    ON CONFLICT DO NOTHING
)
SELECT id, lease_id, queue FROM done;

-- name: task_deps_release
-- Parents $2 succeeded: each blocked child loses that many pending parents; at zero it becomes
-- ready or scheduled by its own due_at.
WITH d AS (
    SELECT child_id, count(*)::int AS n FROM task_deps
    WHERE parent_id = ANY($2::uuid[]) GROUP BY child_id
)
UPDATE tasks t SET
    pending_parents = greatest(t.pending_parents - d.n, 0),
    status = CASE WHEN t.pending_parents - d.n > 0 THEN 'blocked'
                  WHEN t.due_at <= coalesce($1::timestamptz, now()) THEN 'ready'
                  ELSE 'scheduled' END,
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
FROM d
WHERE t.id = ANY(ARRAY(SELECT child_id FROM d)) AND t.id = d.child_id
  AND t.status = 'blocked'
RETURNING t.status;

-- name: task_deps_fail
-- Parents $2 failed or were cancelled: every blocked descendant fails (transitively).
WITH RECURSIVE doomed(id) AS (
    SELECT d.child_id FROM task_deps d
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
    WHERE d.parent_id = ANY($2::uuid[])
  UNION
    SELECT d.child_id FROM doomed
    JOIN task_deps d ON d.parent_id = doomed.id
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
)
UPDATE tasks t SET
    status = 'failed',
    last_error = 'a task it depends on failed or was cancelled',
    finished_at = coalesce($1::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id IN (SELECT id FROM doomed) AND t.status = 'blocked';

-- name: task_heartbeat
-- Only a live lease can be extended: once expired it belongs to the reaper. Each lease is found
-- by one probe of tasks_lease_id_idx and its task then by primary key: a plain
-- "lease_id = ANY($2)" may, under statistics taken when nothing ran, walk every running task.
WITH held AS MATERIALIZED (
    SELECT x.id, l.id AS lease_id
    FROM unnest($2::uuid[]) AS l (id)
    CROSS JOIN LATERAL (
        SELECT id FROM tasks WHERE lease_id = l.id AND status = 'running'
        ORDER BY lease_id LIMIT 1
    ) AS x
)
UPDATE tasks t SET
    lease_expires_at = coalesce($1::timestamptz, now()) + make_interval(secs => $3)
FROM held
-- No status filter here on purpose (tasks_lease_is_running makes the lease match mean
-- "running"): with one, the planner may walk the partial lease index instead of the key.
WHERE t.id = held.id AND t.lease_id = held.lease_id
  AND t.lease_expires_at > coalesce($1::timestamptz, now())
RETURNING t.lease_id, t.lease_expires_at;

-- name: task_expired_leases
SELECT * FROM tasks
WHERE status = 'running' AND lease_expires_at <= coalesce($1::timestamptz, now())
ORDER BY lease_expires_at
LIMIT $2;

-- name: leader_attempt_elect
INSERT INTO leaders AS l (name, node_id, expires_at)
VALUES ($2, $3, coalesce($1::timestamptz, now()) + make_interval(secs => $4))
ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at
WHERE l.node_id = excluded.node_id OR l.expires_at <= coalesce($1::timestamptz, now())
RETURNING node_id;

-- name: leader_resign
DELETE FROM leaders WHERE name = $1 AND node_id = $2;
