-- The PostgreSQL store's batch strategy for create, claim and complete
-- (duetime/store/postgres/hot.py): one statement per batch, arrays of composites through unnest.
-- Conventions as in queries.sql: generic plans stay linear ("id = ANY(array)", never a join of
-- unnest() to tasks); "now" is coalesce(:now::timestamptz, now()): the pinned test time or the
-- database clock. An array a statement unnests is read through a scalar subquery,
-- unnest((SELECT :x::t[])): even a custom plan then cannot see how long it is, so custom and
-- generic plans cost the same and PostgreSQL keeps the generic one after its first five runs.
-- Given the array itself, a custom plan for one element always looks cheaper than the generic
-- plan, so a one-task create or ack would be planned afresh on every call (0.06 and 0.2-0.4 ms).

-- fragment: task_insert_rows
-- :tasks is a task_input[]. The starting status is the rule of duetime.store.core.hot
-- (starting_status): the caller decides dep_failed and pending_parents from the parents it has
-- locked in the same transaction; only "ready or scheduled" is decided here, by the database
-- clock (see docs/adr/0005-store-core.md, and the test that pins both agree). Only created_at
-- (that clock) comes back: the caller knows every other column and works out each status by the
-- same rule on it (no row of columns back per task: ~1.3 us of the node's CPU a task); when
-- fewer were inserted than sent (idempotency keys that exist), task_ids_present says which.
INSERT INTO tasks AS t (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, schedule_id,
    scheduled_for, run_at, due_at, created_at, updated_at, finished_at, last_error,
    cancel_requested, traceparent, request_hash, payload_ref, flow_key)
SELECT
    i.id, i.tenant_id, i.name, i.queue,
    CASE WHEN i.dep_failed THEN 'failed'
         WHEN i.pending_parents > 0 THEN 'blocked'
         WHEN coalesce(i.run_at, c.now) <= c.now THEN 'ready'
         ELSE 'scheduled' END,
    1, i.target_type, i.target, i.payload, i.idempotency_key, i.priority, i.retry,
    i.timeout_seconds, coalesce(i.depends_on, '{}'), i.pending_parents, false, i.concurrency_key,
    i.labels, 0, 0, i.schedule_id, i.scheduled_for, coalesce(i.run_at, c.now),
    coalesce(i.run_at, c.now), c.now, c.now,
    CASE WHEN i.dep_failed THEN c.now END,
    CASE WHEN i.dep_failed THEN 'a task it depends on failed or was cancelled' END,
    false, i.traceparent, i.request_hash, i.payload_ref, i.flow_key
FROM unnest((SELECT :tasks::task_input[])) AS i
CROSS JOIN (SELECT coalesce(:now::timestamptz, now()) AS now) AS c
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING t.created_at

-- name: task_insert
-- Several tasks: one row back, the clock (NULL when none was inserted) and the count.
WITH made AS (
-- include: task_insert_rows
)
SELECT max(created_at) AS now, count(*) AS inserted FROM made;

-- name: task_insert_one
-- One task: its clock, or no row when an idempotency key met an existing task (as a one-row
-- statement this shape costs PostgreSQL ~10 us less than task_insert's: docs/benchmarks.md).
-- include: task_insert_rows
;

-- name: task_ids_present
-- Which of the ids a task_insert just sent are tasks: those not inserted met an existing
-- idempotency key.
SELECT id::text AS id FROM tasks WHERE id = ANY(:ids::uuid[]);

-- name: task_select_by_idempotency_key
-- May return extra rows when a batch mixes tenants: the caller keeps the (tenant, key) pairs it
-- asked for. Plain = ANY keeps the unique index usable under a generic plan.
SELECT * FROM tasks
WHERE tenant_id = ANY(:tenant_ids::text[]) AND idempotency_key = ANY(:keys::text[]);

-- name: task_parents_lock
-- Locking the parents (in id order, against deadlocks) makes a parent's completion wait for our
-- commit, so its dependents step sees our task_deps rows; or we wait and read its final status.
SELECT id, tenant_id, status, has_dependents FROM tasks
WHERE id = ANY(:ids::uuid[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: task_parents_mark
UPDATE tasks SET has_dependents = true WHERE id = ANY(:ids::uuid[]) AND NOT has_dependents;

-- name: task_deps_insert
INSERT INTO task_deps (parent_id, child_id)
SELECT * FROM unnest(:parent_ids::uuid[], :child_ids::uuid[])
ON CONFLICT DO NOTHING;

-- name: claim_in_index_order
-- Run before every task_claim_push, in its transaction. Statistics lag behind a burst: they
-- still say "nothing is ready" while thousands are, and the planner then reads the whole ready
-- set with a bitmap scan and sorts it for every claim (measured: 40 ms for 500 of 20,000 ready),
-- where a walk of tasks_ready_push_idx in its order stops after the first few hundred rows
-- (1.5 ms). Without sorts that walk is the only plan left. Every run, not some: a prepared
-- statement's cached plan keeps the settings it was planned under.
SET LOCAL enable_sort = off;

-- fragment: claim_lease
-- Every claim: lease the rows its "picked" CTE chose (FOR UPDATE SKIP LOCKED, so claimers on
-- many nodes never collide; the status test guards the keyed claim, which does not lock what it
-- picks). :lease_seconds NULL = the task's own timeout + :grace_seconds.
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce(:now::timestamptz, now())
        + make_interval(secs => coalesce(:lease_seconds::float8,
                                         t.timeout_seconds + :grace_seconds::float8)),
    worker_id = :worker_id,
    started_at = coalesce(:now::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked)) AND t.status = 'ready'
RETURNING t.*;

-- fragment: claimable_queue
-- Claims skip tasks of paused and limited queues (limited ones: the locked path below).
AND NOT EXISTS (
    SELECT 1 FROM queues q
    WHERE q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
      AND (q.paused OR q.limited OR q.key_rate IS NOT NULL))

-- fragment: claimable_this_queue
-- The same test for a claim of one tenant's queue, asked of the request's own names: checked
-- once, not joined to every candidate. Joined, the planner cannot tell how few queues hold
-- anything back; with statistics that know of a ready backlog it then reads and sorts the whole
-- backlog for every claim (57 ms for a lease of 10 out of 100,000 ready tasks, against 1 ms
-- walking tasks_ready_worker_idx: benchmarks/lease_backlog.py).
AND NOT EXISTS (
    SELECT 1 FROM queues q
    WHERE q.tenant_id = :tenant_id AND q.name = :queue
      AND (q.paused OR q.limited OR q.key_rate IS NOT NULL))

-- name: ready_push_queues
-- The (tenant, queue)s with ready push tasks, their tenant's weight, and whether the queue holds
-- them back (paused or limited: task_claim_push skips it, the limited path claims it): a skip
-- scan of tasks_ready_push_idx's first two columns, one index probe per (tenant, queue) however
-- long its backlog, for the shares of task_claim_push (duetime.store.core.hot.claim_shares).
WITH RECURSIVE active (tenant_id, queue) AS (
    (SELECT tenant_id, queue FROM tasks
     WHERE status = 'ready' AND target_type <> 'worker'
       AND (:tenant_id::text IS NULL OR tenant_id = :tenant_id)
       AND (:queue::text IS NULL OR queue = :queue)
       AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
     ORDER BY tenant_id, queue LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.queue
    FROM active a CROSS JOIN LATERAL (
        SELECT t.tenant_id, t.queue FROM tasks t
        WHERE t.status = 'ready' AND t.target_type <> 'worker'
          AND (t.tenant_id, t.queue) > (a.tenant_id, a.queue)
          AND (:tenant_id::text IS NULL OR t.tenant_id = :tenant_id)
          AND (:queue::text IS NULL OR t.queue = :queue)
          AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))
        ORDER BY t.tenant_id, t.queue LIMIT 1
    ) AS n
)
SELECT a.tenant_id, a.queue, coalesce(tn.weight, 1) AS weight,
       EXISTS (SELECT 1 FROM queues q
               WHERE q.tenant_id = a.tenant_id AND q.name = a.queue
                 AND (q.paused OR q.limited OR q.key_rate IS NOT NULL)) AS held
FROM active a LEFT JOIN tenants tn ON tn.id = a.tenant_id
WHERE a.tenant_id <> ALL(:exclude::text[]);

-- name: task_claim_push
-- Dispatcher: each tenant takes its share (:shares) of the claim, in its own priority and due
-- order across its queues (:tenant_ids, :queues, :shares pairwise, a tenant's share repeated for
-- each of its queues): up to a share from each queue via tasks_ready_push_idx, then the best of
-- them per tenant. The queue test runs in the claim's snapshot (a queue paused or limited since
-- ready_push_queues read it is skipped). The literal target_type predicate lets even a generic
-- plan use the index.
WITH found AS (
    SELECT x.id, s.tenant_id, s.n, x.priority, x.due_at
    -- Arrays read through scalar subqueries (see the top of this file): a custom plan that saw
    -- one (tenant, queue) always looked cheaper than the generic plan, so every claim was
    -- planned afresh (0.56 ms of its bind in the server log of an immediate-http run).
    FROM unnest((SELECT :tenant_ids::text[]), (SELECT :queues::text[]), (SELECT :shares::int[]))
        AS s (tenant_id, queue, n)
    CROSS JOIN LATERAL (
        SELECT id, priority, due_at FROM tasks
        WHERE status = 'ready' AND target_type <> 'worker'
          AND tenant_id = s.tenant_id AND queue = s.queue
          AND target_type = ANY(:types::text[])
          AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
        ORDER BY priority DESC, due_at
        LIMIT s.n
        FOR UPDATE SKIP LOCKED
    ) AS x
    WHERE NOT EXISTS (
        SELECT 1 FROM queues q
        WHERE q.tenant_id = s.tenant_id AND q.name = s.queue
          AND (q.paused OR q.limited OR q.key_rate IS NOT NULL))
), picked AS (
    SELECT id FROM (
        SELECT id, n, row_number() OVER (
            PARTITION BY tenant_id ORDER BY priority DESC, due_at) AS rank
        FROM found) AS ranked
    WHERE rank <= n
)
-- include: claim_lease

-- name: task_claim_worker
-- Lease API: worker tasks of one tenant's queue, via tasks_ready_worker_idx.
WITH picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = :tenant_id
      AND queue = :queue
      AND 'worker' = ANY(:types::text[])
      AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
      -- include: claimable_this_queue
    ORDER BY priority DESC, due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
-- include: claim_lease

-- name: task_claim_any
-- Any mix of target types, any or one queue.
WITH picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready'
      AND target_type = ANY(:types::text[])
      AND (:queue::text IS NULL OR queue = :queue)
      AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
      AND (:tenant_id::text IS NULL OR tenant_id = :tenant_id)
      AND tenant_id <> ALL(:exclude::text[])
      -- include: claimable_queue
    ORDER BY priority DESC, due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
-- include: claim_lease

-- name: tenant_limited_all
-- Tenants with a max_concurrency quota (their claims lock their row, see tenant_lock); cached
-- with the limited queues.
SELECT id, max_concurrency FROM tenants WHERE max_concurrency IS NOT NULL;

-- name: tenant_lock
-- Serializes the claims of tenants with a max_concurrency quota, across nodes, in id order
-- (against deadlocks; always before any queue_lock). Held until the claim commits, so the next
-- claimer's count (tenant_running, a later statement) includes ours.
SELECT id, max_concurrency FROM tenants
WHERE id = ANY(:tenant_ids::text[]) AND max_concurrency IS NOT NULL
ORDER BY id
FOR NO KEY UPDATE;

-- name: tenant_running
SELECT tenant_id, count(*)::int AS n FROM tasks
WHERE tenant_id = ANY(:tenant_ids::text[]) AND status = 'running'
GROUP BY tenant_id;

-- name: queue_limited_all
-- Every queue whose claims go through the locked path (see queue_lock); cached by each store.
SELECT tenant_id, name FROM queues WHERE (limited OR key_rate IS NOT NULL) AND NOT paused;

-- name: queue_limited_ready_worker
-- Of the limited queues (:tenant_ids, :queues pairwise), those with a ready worker task the
-- claim could take: one LIMIT 1 probe per queue, in the partial index's own order (a generic
-- plan would otherwise turn an EXISTS into a scan of every ready task).
SELECT q.tenant_id, q.name
FROM unnest(:tenant_ids::text[], :queues::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type = 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND 'worker' = ANY(:types::text[])
      AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))
    ORDER BY t.priority DESC, t.due_at  -- the index's order: stop at the first hit
    LIMIT 1
) AS found;

-- name: queue_limited_ready_push
-- tasks_ready_push_idx holds only the ready push tasks the dispatcher has not taken: mostly
-- those of paused and limited queues.
SELECT q.tenant_id, q.name
FROM unnest(:tenant_ids::text[], :queues::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type <> 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND t.target_type = ANY(:types::text[])
      AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))
    ORDER BY t.priority DESC, t.due_at  -- the index's order: stop at the first hit
    LIMIT 1
) AS found;

-- name: queue_limited_ready
-- Any mix of target types: both probes above (each on its own partial index), merged.
SELECT q.tenant_id, q.name
FROM unnest(:tenant_ids::text[], :queues::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type = 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND 'worker' = ANY(:types::text[])
      AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))
    ORDER BY t.priority DESC, t.due_at
    LIMIT 1
) AS found
UNION
SELECT q.tenant_id, q.name
FROM unnest(:tenant_ids::text[], :queues::text[]) AS q (tenant_id, name)
CROSS JOIN LATERAL (
    SELECT 1 FROM tasks t
    WHERE t.status = 'ready' AND t.target_type <> 'worker'
      AND t.tenant_id = q.tenant_id AND t.queue = q.name
      AND t.target_type = ANY(:types::text[])
      AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))
    ORDER BY t.priority DESC, t.due_at
    LIMIT 1
) AS found;

-- name: queue_lock
-- Serializes the claims of one limited queue: held until the claim's transaction commits, so the
-- next claimer's count of running tasks (a later statement, a fresh snapshot) includes ours, and
-- it reads the bucket we left.
-- "at" is the clock, not now(): now() is when the transaction began, possibly before a wait
-- for this lock behind a later claimer; the bucket's time must never go back (queue_tokens_put).
SELECT max_concurrency, rate_limit_per_second, burst, max_concurrency_per_key, tokens, tokens_at,
       key_rate, key_burst, coalesce(:now::timestamptz, clock_timestamp()) AS at
FROM queues
WHERE tenant_id = :tenant_id AND name = :queue AND (limited OR key_rate IS NOT NULL) AND NOT paused
FOR UPDATE;

-- name: queue_tokens_put
-- What a claim left in the queue's bucket (run in queue_lock's transaction).
UPDATE queues SET tokens = :tokens::float8,
    tokens_at = greatest(coalesce(tokens_at, :at::timestamptz), :at::timestamptz)
WHERE tenant_id = :tenant_id AND name = :queue;

-- fragment: limited_room
-- How many a limited queue's claim may take: :limit (the claim's room, already cut to the
-- bucket's whole tokens), and below max_concurrency less those running (NULL: no cap).
room AS (
    SELECT greatest(0, least(:limit::int, coalesce(:max_concurrency::int - (
        SELECT count(*) FROM tasks
        WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue), :limit::int)))::int
        AS n
)

-- name: task_claim_limited_worker
-- Lease API on a limited queue: worker tasks of one tenant's queue. Run after queue_lock, in its
-- transaction.
WITH
-- include: limited_room
, picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = :tenant_id
      AND queue = :queue
      AND 'worker' = ANY(:types::text[])
      AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
-- include: claim_lease

-- name: task_claim_limited_push
-- Push targets of a limited queue (the dispatcher's locked path), via tasks_ready_push_idx.
WITH
-- include: limited_room
, picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND target_type <> 'worker' AND tenant_id = :tenant_id
      AND queue = :queue
      AND target_type = ANY(:types::text[])
      AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
-- include: claim_lease

-- name: task_claim_limited_any
-- Any mix of target types on a limited queue.
WITH
-- include: limited_room
, picked AS (
    SELECT id FROM tasks
    WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue
      AND target_type = ANY(:types::text[])
      AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
    ORDER BY priority DESC, due_at
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
)
-- include: claim_lease

-- name: claim_keyed_plan
-- Run before every task_claim_keyed, in its transaction. Without sorts (as claim_in_index_order,
-- and for the same reason): with statistics that say "nothing is ready", a key's first tasks
-- and the list of keys were read through tasks_tenant_status_idx and sorted, every ready task of
-- the tenant once per key listed, where tasks_ready_keyed_idx gives them in order. And generic:
-- planning that statement (many parts) takes ~2 ms, which custom plans pay on every claim, more
-- than a claim of a short backlog takes to run; its generic plan walks the same indexes
-- (tests/store/test_keyed_claim_scale.py checks both plans, under stale and analyzed
-- statistics), so it is planned once per connection. LOCAL: until the transaction ends (with a
-- tenant quota, the whole claim's: the statements after it then run the same way, as the push
-- claim's setting already has them do).
SET LOCAL enable_sort = off;
SET LOCAL plan_cache_mode = force_generic_plan;

-- fragment: keyed_first
-- The first ready tasks of key l.k that may run, in the key's claim order: :per_key less those
-- of the key running (tasks_ready_keyed_idx, one probe). Every ready task of the key counts,
-- whatever its target type or name.
SELECT u.id FROM tasks u
WHERE u.status = 'ready' AND u.concurrency_key IS NOT NULL
  AND u.tenant_id = :tenant_id AND u.queue = :queue AND u.concurrency_key = l.k
ORDER BY u.priority DESC, u.due_at, u.created_at, u.id
LIMIT greatest(0, :per_key::int - coalesce(((SELECT n FROM busy) ->> l.k)::int, 0))

-- fragment: keyed_may_run
-- Whether ready task t may run now: it has no key, or it is among its key's first tasks that
-- may run (keyed_first), looked up in "lead" for the keys found there, else asked for t's key.
(t.concurrency_key IS NULL
 OR coalesce(((SELECT n FROM busy) ->> t.concurrency_key)::int, 0) < :per_key::int
    AND CASE WHEN (SELECT keys FROM lead) ? t.concurrency_key
             THEN (SELECT heads FROM lead) ? t.id::text
             ELSE t.id = ANY(ARRAY(SELECT f.id FROM (SELECT t.concurrency_key AS k) AS l,
                                   LATERAL (
-- include: keyed_first
                                   ) AS f))
        END)

-- fragment: keyed_worker
-- The claim's ready worker tasks of the queue (tasks_ready_worker_idx).
t.status = 'ready' AND t.target_type = 'worker' AND t.tenant_id = :tenant_id
AND t.queue = :queue
AND 'worker' = ANY(:types::text[])
AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))

-- fragment: keyed_push
-- The claim's ready push tasks of the queue (tasks_ready_push_idx).
t.status = 'ready' AND t.target_type <> 'worker' AND t.tenant_id = :tenant_id
AND t.queue = :queue
AND t.target_type = ANY(:types::text[])
AND (:names::text[] IS NULL OR t.name = ANY(:names::text[]))

-- name: task_claim_keyed
-- A queue with max_concurrency_per_key (any target types): a task whose concurrency_key already
-- has :per_key running, or earlier ready ones filling the rest, waits; tasks without a key are
-- not bound. Each key's tasks go in priority, due, creation order, so with 1 they run serially.
-- Walks the queue's ready tasks of the wanted types in claim order (each target kind's ready
-- index) and stops at the room; a keyed task is taken when it is among its key's first tasks
-- that may run (keyed_first: one probe of tasks_ready_keyed_idx). A claim so reads the room and
-- the tasks before it that may not run, where the window it replaced ranked every ready task of
-- the queue (288 ms per claim at 100,000 ready; benchmarks/keyed_claim.py). Tasks without a key
-- are only found by that walk (an index of theirs would cost every plain task a write), so a
-- backlog that may not run (one busy key's) is still walked once per claim, without sort or
-- rank. Keys are asked once, not per row, in "lead": every key of a queue of at most 32 (a skip
-- scan of tasks_ready_keyed_idx, stopped at 33), and the keys of the first room keyed tasks; a
-- row of theirs is then a lookup, a row of another key asks for its key's first tasks itself.
-- The queue lock serializes claimers, so no row can be taken twice, and claim_lease re-tests the
-- status. tests/store/test_keyed_claim_equivalence.py holds it to the window statement.
WITH RECURSIVE
-- include: limited_room
, busy AS MATERIALIZED (  -- running tasks by key: {"key": n}
    SELECT coalesce(jsonb_object_agg(concurrency_key, n), '{}') AS n FROM (
        SELECT concurrency_key, count(*)::int AS n FROM tasks
        WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue
          AND concurrency_key IS NOT NULL
        GROUP BY concurrency_key
    ) AS b
),
keys (k) AS (  -- the queue's keys with ready tasks, one index probe each
    (SELECT concurrency_key FROM tasks
     WHERE status = 'ready' AND concurrency_key IS NOT NULL
       AND tenant_id = :tenant_id AND queue = :queue
     ORDER BY concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT concurrency_key FROM tasks
            WHERE status = 'ready' AND concurrency_key IS NOT NULL
              AND tenant_id = :tenant_id AND queue = :queue AND concurrency_key > keys.k
            ORDER BY concurrency_key LIMIT 1)
    FROM keys WHERE keys.k IS NOT NULL
),
few AS (
    SELECT array_agg(k) AS ks FROM (SELECT k FROM keys WHERE k IS NOT NULL LIMIT 33) AS s
),
lead AS MATERIALIZED (  -- {"key": true} and {"id of one of their first tasks": true}
    SELECT coalesce(jsonb_object_agg(l.k, true), '{}') AS keys,
           coalesce(jsonb_object_agg(f.id::text, true) FILTER (WHERE f.id IS NOT NULL), '{}')
               AS heads
    FROM (
        SELECT few.k FROM (SELECT unnest(ks) AS k FROM few WHERE cardinality(ks) <= 32) AS few
        WHERE coalesce(((SELECT n FROM busy) ->> few.k)::int, 0) < :per_key::int
        UNION
        SELECT w.concurrency_key FROM (
            (SELECT t.concurrency_key FROM tasks t
             WHERE
-- include: keyed_worker
               AND t.concurrency_key IS NOT NULL
               AND coalesce(((SELECT n FROM busy) ->> t.concurrency_key)::int, 0) < :per_key::int
             ORDER BY t.priority DESC, t.due_at
             LIMIT (SELECT n FROM room))
            UNION ALL
            (SELECT t.concurrency_key FROM tasks t
             WHERE
-- include: keyed_push
               AND t.concurrency_key IS NOT NULL
               AND coalesce(((SELECT n FROM busy) ->> t.concurrency_key)::int, 0) < :per_key::int
             ORDER BY t.priority DESC, t.due_at
             LIMIT (SELECT n FROM room))
        ) AS w
    ) AS l
    LEFT JOIN LATERAL (
-- include: keyed_first
    ) AS f ON true
),
-- Each ready index walked in its order, (priority, due), to the room. Its order has no creation
-- time or id, so the tasks of the (priority, due) of the last one taken are then read (an index
-- range: a batch of creations shares its due time), sorted in claim order, and tested in that
-- order until the room is filled again, for the claim order to break ties there. (LIMIT WITH
-- TIES would read on to the next task that may run, however far.)
worker_walk AS MATERIALIZED (
    SELECT t.id, t.priority, t.due_at, t.created_at FROM (
        SELECT t.id, t.priority, t.due_at, t.created_at, t.concurrency_key FROM tasks t
        WHERE
-- include: keyed_worker
        ORDER BY t.priority DESC, t.due_at
        OFFSET 0  -- tested as they come, not all of a small table before a sort
    ) AS t
    WHERE
-- include: keyed_may_run
    LIMIT (SELECT n FROM room)
),
push_walk AS MATERIALIZED (
    SELECT t.id, t.priority, t.due_at, t.created_at FROM (
        SELECT t.id, t.priority, t.due_at, t.created_at, t.concurrency_key FROM tasks t
        WHERE
-- include: keyed_push
        ORDER BY t.priority DESC, t.due_at
        OFFSET 0
    ) AS t
    WHERE
-- include: keyed_may_run
    LIMIT (SELECT n FROM room)
),
picked AS (
    SELECT c.id FROM (
        SELECT * FROM worker_walk
        UNION
        (SELECT t.id, t.priority, t.due_at, t.created_at FROM (
             SELECT t.id, t.priority, t.due_at, t.created_at, t.concurrency_key FROM tasks t
             WHERE (SELECT count(*) FROM worker_walk) = (SELECT n FROM room)
               AND t.priority = (SELECT priority FROM worker_walk
                                 ORDER BY priority, due_at DESC LIMIT 1)
               AND t.due_at = (SELECT due_at FROM worker_walk
                               ORDER BY priority, due_at DESC LIMIT 1)
               AND
-- include: keyed_worker
             ORDER BY t.created_at, t.id
             OFFSET 0  -- tested after the sort, only until the room is filled
         ) AS t
         WHERE
-- include: keyed_may_run
         LIMIT (SELECT n FROM room))
        UNION
        SELECT * FROM push_walk
        UNION
        (SELECT t.id, t.priority, t.due_at, t.created_at FROM (
             SELECT t.id, t.priority, t.due_at, t.created_at, t.concurrency_key FROM tasks t
             WHERE (SELECT count(*) FROM push_walk) = (SELECT n FROM room)
               AND t.priority = (SELECT priority FROM push_walk
                                 ORDER BY priority, due_at DESC LIMIT 1)
               AND t.due_at = (SELECT due_at FROM push_walk
                               ORDER BY priority, due_at DESC LIMIT 1)
               AND
-- include: keyed_push
             ORDER BY t.created_at, t.id
             OFFSET 0
         ) AS t
         WHERE
-- include: keyed_may_run
         LIMIT (SELECT n FROM room))
    ) AS c
    ORDER BY c.priority DESC, c.due_at, c.created_at, c.id
    LIMIT (SELECT n FROM room)
)
-- include: claim_lease

-- name: task_complete_many
-- :completions is a task_completion[], each with the status its ending decided
-- (duetime.lifecycle.finish). Fenced on (id, lease_id). The one rule applied here is the
-- cancel-requested override (duetime.states.after_cancel_request), read under the fence; and the
-- clock's arithmetic for a retry's due time. The attempt rows are written by the same statement.
WITH c AS (SELECT * FROM unnest((SELECT :completions::task_completion[]))),
done AS (
    UPDATE tasks t SET
        status = CASE WHEN t.cancel_requested AND c.status <> 'succeeded' THEN 'cancelled'
                      ELSE c.status END,
        due_at = CASE WHEN c.status = 'retrying' AND NOT t.cancel_requested
                      THEN coalesce(:now::timestamptz, now()) + make_interval(secs => c.retry_delay)
                      ELSE t.due_at END,
        finished_at = CASE WHEN c.status = 'retrying' AND NOT t.cancel_requested THEN NULL
                           ELSE coalesce(:now::timestamptz, now()) END,
        result = CASE WHEN c.status = 'succeeded' THEN c.result ELSE t.result END,
        last_error = CASE WHEN c.status = 'succeeded' THEN t.last_error ELSE c.error END,
        lease_id = NULL,
        lease_expires_at = NULL,
        version = t.version + 1,
        updated_at = coalesce(:now::timestamptz, now())
    FROM c
    -- The lease is the fence: tasks_lease_is_running (a CHECK) makes a matching lease_id mean
    -- "running". No status filter on purpose: it would let the planner estimate the running
    -- tasks from statistics, which are often stale ("none running"), pick them as the outer
    -- side of a nested loop and re-run unnest() for each: quadratic. Without it, tasks are
    -- reached by primary key from each completion (or by one hash join on a small table).
    WHERE t.id = ANY(ARRAY(SELECT id FROM c)) AND t.id = c.id AND t.lease_id = c.lease_id
      -- The reaper's lease_expired ending counts only if the lease is still expired: a
      -- heartbeat that landed after the reaper read it wins.
      AND (c.outcome <> 'lease_expired' OR t.lease_expires_at <= coalesce(:now::timestamptz, now()))
    RETURNING t.id, c.lease_id, t.status, t.has_dependents, t.attempts, c.outcome,
              c.started_at, c.duration_ms, c.error, c.http_status, c.worker, c.logs, c.response,
              t.tenant_id, t.queue
),
att AS (
    INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error,
                          http_status, duration_ms, worker, logs, response)
    SELECT d.id, d.attempts, d.started_at, coalesce(:now::timestamptz, now()), d.outcome, d.error,
           d.http_status, d.duration_ms, d.worker, d.logs, d.response
    FROM done d
    ON CONFLICT DO NOTHING
)
SELECT id, lease_id, status, has_dependents, tenant_id, queue FROM done;

-- name: task_complete_leased
-- Lease API, succeeded attempts by lease id alone (:lease_ids, :results, :logs of :tenant_id):
-- no read of the tasks beforehand. Each lease is found by one probe of tasks_lease_id_idx and
-- its task then by primary key (as in task_heartbeat). The lease is the fence, as in
-- task_complete_many; tasks with dependents are left to that statement, which settles them in a
-- transaction. :logs may be NULL (no completion has logs): unnest pads it with NULLs.
WITH l AS MATERIALIZED (
    SELECT x.id, l.lease_id, l.result, l.logs
    FROM unnest((SELECT :lease_ids::uuid[]), (SELECT :results::text[]), (SELECT :logs::text[]))
        AS l (lease_id, result, logs)
    CROSS JOIN LATERAL (
        SELECT id, tenant_id FROM tasks
        WHERE lease_id = l.lease_id  -- running, by tasks_lease_is_running (migration 0021)
        ORDER BY lease_id LIMIT 1
    ) AS x
    -- Tested outside the probe: inside, stale statistics ("nothing runs") made it a walk of
    -- the tenant's running tasks by tasks_tenant_status_idx.
    WHERE x.tenant_id = :tenant_id
),
done AS (
    UPDATE tasks t SET
        status = 'succeeded',
        finished_at = coalesce(:now::timestamptz, now()),
        result = l.result,
        lease_id = NULL,
        lease_expires_at = NULL,
        version = t.version + 1,
        updated_at = coalesce(:now::timestamptz, now())
    FROM l
    -- Tasks by primary key only ("id = ANY", as in the claims; the tenant is tested in l): a
    -- tenant test here lets plans made under statistics of a smaller table walk the tenant's
    -- tasks and rescan l for each (500 acks among ~1,500 tasks: 45-130 ms instead of a few).
    WHERE t.id = ANY(ARRAY(SELECT id FROM l)) AND t.id = l.id AND t.lease_id = l.lease_id
      AND NOT t.has_dependents
      -- A worker id over the attempts' 256-byte limit is cut by the general path (recordable).
      AND octet_length(coalesce(t.worker_id, '')) <= 256
    RETURNING t.id, l.lease_id, t.queue, t.attempts, t.started_at, t.worker_id, l.logs,
              t.traceparent, t.target_type
),
att AS (
    INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, error,
                          http_status, duration_ms, worker, logs)
    SELECT d.id, d.attempts, coalesce(d.started_at, coalesce(:now::timestamptz, now())),
           coalesce(:now::timestamptz, now()), 'succeeded', NULL, NULL,
           greatest(0, extract(epoch FROM coalesce(:now::timestamptz, now())
                                          - coalesce(d.started_at, coalesce(:now::timestamptz, now()))
                               ) * 1000)::float8,
           d.worker_id, d.logs
    FROM done d
    ON CONFLICT DO NOTHING
)
SELECT id, lease_id, queue, attempts, started_at, traceparent, target_type FROM done;

-- Keyed rate limits (duetime/store/core/keyed.py; claimed by duetime/store/postgres/flow.py,
-- after queue_lock, in its transaction).

-- name: flow_ready_keys
-- The queue's keys with ready work of the claim's kind, in key order after :after (NULL: from
-- the first) up to :upto (NULL: to the last), at most :cap: a skip scan of tasks_ready_flow_idx,
-- one probe per key, each giving the key's first ready task in claim order; with its bucket
-- (none: full) and, with :per_key, its running tasks (tasks_running_queue_idx: the rule keys a
-- task's concurrency_key by the same expression). The recursion stops at :cap (a recursive
-- query is read only as far as its reader asks).
WITH RECURSIVE keys (k, priority, due_at, id) AS (
    (SELECT flow_key, priority, due_at, id FROM tasks
     WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id
       AND queue = :queue
       AND (:after::text IS NULL OR flow_key > :after)
       AND (:upto::text IS NULL OR flow_key <= :upto)
       AND target_type = ANY(:types::text[])
       AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
     ORDER BY flow_key, priority DESC, due_at
     LIMIT 1)
    UNION ALL
    SELECT n.flow_key, n.priority, n.due_at, n.id
    FROM keys CROSS JOIN LATERAL (
        SELECT flow_key, priority, due_at, id FROM tasks
        WHERE status = 'ready' AND flow_key IS NOT NULL AND tenant_id = :tenant_id
          AND queue = :queue AND flow_key > keys.k
          AND (:upto::text IS NULL OR flow_key <= :upto)
          AND target_type = ANY(:types::text[])
          AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
        ORDER BY flow_key, priority DESC, due_at
        LIMIT 1
    ) AS n
), heads AS (
    SELECT k, priority, due_at, id FROM keys LIMIT :cap
)
SELECT h.k AS key, h.priority, h.due_at, h.id, b.tokens, b.tokens_at,
       CASE WHEN :per_key::int IS NULL OR h.k = '' THEN NULL ELSE (
           SELECT count(*)::int FROM tasks r
           WHERE r.status = 'running' AND r.tenant_id = :tenant_id AND r.queue = :queue
             AND r.concurrency_key = h.k) END AS running
FROM heads AS h
LEFT JOIN flow_buckets AS b ON b.tenant_id = :tenant_id AND b.queue = :queue AND b.key = h.k
ORDER BY h.k;

-- name: task_claim_flow
-- The keys' first tasks flow_ready_keys read (:heads, keys that may take one: by primary key),
-- and up to :takes of each of :keys' first ready tasks (pairwise; one probe of
-- tasks_ready_flow_idx each), the best of them in claim order to the room. Not locked when
-- picked: the queue lock serializes this queue's claimers, and claim_lease re-tests the status.
WITH
-- include: limited_room
, found AS (
    SELECT id, priority, due_at, created_at FROM tasks
    WHERE id IN (SELECT h FROM unnest((SELECT :heads::uuid[])) AS h) AND status = 'ready'
    UNION ALL
    SELECT x.id, x.priority, x.due_at, x.created_at
    FROM unnest((SELECT :keys::text[]), (SELECT :takes::int[])) AS s (k, n)
    CROSS JOIN LATERAL (
        SELECT id, priority, due_at, created_at FROM tasks
        WHERE status = 'ready' AND flow_key IS NOT NULL AND flow_key = s.k
          AND tenant_id = :tenant_id AND queue = :queue
          AND target_type = ANY(:types::text[])
          AND (:names::text[] IS NULL OR name = ANY(:names::text[]))
        ORDER BY priority DESC, due_at, created_at, id
        LIMIT s.n
    ) AS x
), picked AS (
    SELECT id FROM found
    ORDER BY priority DESC, due_at, created_at, id
    LIMIT (SELECT n FROM room)
)
-- include: claim_lease

-- name: flow_buckets_put
-- What a claim left in the buckets it took from (the level, at queue_lock's clock, and when the
-- bucket is full again: the sweep's test). Its time never goes back.
INSERT INTO flow_buckets AS b (tenant_id, queue, key, tokens, tokens_at, full_at)
SELECT :tenant_id, :queue, u.k, u.tokens, :at::timestamptz, u.full_at
FROM unnest(:keys::text[], :tokens::float8[], :full_ats::timestamptz[]) AS u (k, tokens, full_at)
ON CONFLICT (tenant_id, queue, key) DO UPDATE SET
    tokens = excluded.tokens,
    tokens_at = greatest(b.tokens_at, excluded.tokens_at),
    full_at = excluded.full_at;

-- name: flow_keys_fill_queue
-- A keyed queue said to have ready work whose flow index lists none: its ready tasks came
-- without a flow key (see flow_keys_fill); they get '' now, and follow the queue's own limits.
UPDATE tasks t SET flow_key = ''
WHERE t.id = ANY(ARRAY(
    (SELECT id FROM tasks
     WHERE status = 'ready' AND target_type = 'worker' AND tenant_id = :tenant_id
       AND queue = :queue AND flow_key IS NULL
     LIMIT :limit)
    UNION ALL
    (SELECT id FROM tasks
     WHERE status = 'ready' AND target_type <> 'worker' AND tenant_id = :tenant_id
       AND queue = :queue AND flow_key IS NULL
     LIMIT :limit)))
  AND t.status = 'ready' AND t.flow_key IS NULL;
