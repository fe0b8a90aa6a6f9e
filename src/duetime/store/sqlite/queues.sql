-- Named queries of the SQLite store for queues, pull workers and the lease API, loaded by
-- duetime.store.sqlite.queues. Conventions as in queries.sql (":now" in microseconds, lists as
-- one JSON text parameter).

-- name: queue_put
INSERT INTO queues (tenant_id, name, rate_limit_per_second, burst, max_concurrency,
                    max_concurrency_per_key, paused, updated_at)
VALUES (:tenant_id, :name, :rate_limit_per_second, :burst, :max_concurrency,
        :max_concurrency_per_key, :paused, :now)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    rate_limit_per_second = excluded.rate_limit_per_second,
    burst = excluded.burst,
    max_concurrency = excluded.max_concurrency,
    max_concurrency_per_key = excluded.max_concurrency_per_key,
    paused = excluded.paused,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_get
SELECT * FROM queues WHERE tenant_id = :tenant_id AND name = :name;

-- name: queue_list
SELECT * FROM queues WHERE tenant_id = :tenant_id ORDER BY name;

-- Limited queues a claim may take from. The claim statements of queries.sql skip them; the
-- caller claims from each within its room, in the same write transaction.
-- name: queue_limited
SELECT tenant_id, name, max_concurrency FROM queues
WHERE max_concurrency IS NOT NULL AND paused = 0
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR name = :queue)
ORDER BY tenant_id, name;

-- The same for push claims (the dispatcher), only queues with a ready push task: walks the
-- tasks_ready_push index (CROSS JOIN keeps tasks the outer loop), which holds only the ready push
-- tasks not yet taken, instead of every ready task of a limited queue.
-- name: queue_limited_ready_push
SELECT DISTINCT q.tenant_id, q.name, q.max_concurrency
FROM tasks CROSS JOIN queues AS q
    ON q.tenant_id = tasks.tenant_id AND q.name = tasks.queue
WHERE tasks.status = 'ready' AND tasks.target_type <> 'worker'
  AND tasks.target_type IN (SELECT value FROM json_each(:types))
  AND (:names IS NULL OR tasks.name IN (SELECT value FROM json_each(:names)))
  AND q.max_concurrency IS NOT NULL AND q.paused = 0
  AND (:tenant_id IS NULL OR q.tenant_id = :tenant_id)
  AND (:queue IS NULL OR q.name = :queue)
ORDER BY q.tenant_id, q.name;

-- name: queue_running
SELECT count(*) AS n FROM tasks
WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue;

-- Worker tasks of one tenant's limited queue, via tasks_ready_worker.
-- name: task_claim_limited_worker
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
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- Any target types of one tenant's limited queue (the dispatcher's side).
-- name: task_claim_limited
UPDATE tasks SET
    status = 'running', version = version + 1, attempts = attempts + 1,
    lease_id = duetime_uuid(),
    lease_expires_at = :now + coalesce(:lease_us, CAST(round(timeout_seconds * 1000000) AS INTEGER)
                                                  + :grace_us),
    started_at = :now, finished_at = NULL, updated_at = :now, worker_id = :worker_id
WHERE rowid IN (
    SELECT rowid FROM tasks
    WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue
      AND target_type IN (SELECT value FROM json_each(:types))
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
    ORDER BY priority DESC, due_at
    LIMIT :limit)
RETURNING *, rowid AS claim_rowid;

-- A lease is current while its task runs under it; via tasks_lease.
-- name: task_leases_get
SELECT * FROM tasks
WHERE lease_id IN (SELECT value FROM json_each(:lease_ids)) AND status = 'running'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- queues only grows (sorted, at most 64 names). first_seen_at = :now tells a first sighting.
-- name: worker_seen
INSERT INTO workers (tenant_id, worker_id, queues, first_seen_at, last_seen_at)
VALUES (:tenant_id, :worker_id, :queues, :now, :now)
ON CONFLICT (tenant_id, worker_id) DO UPDATE SET
    last_seen_at = max(workers.last_seen_at, excluded.last_seen_at),
    queues = (
        SELECT json_group_array(value) FROM (
            SELECT value FROM json_each(workers.queues)
            UNION
            SELECT value FROM json_each(excluded.queues)
            ORDER BY value
            LIMIT 64))
RETURNING first_seen_at;

-- name: worker_prune
DELETE FROM workers WHERE tenant_id = :tenant_id AND last_seen_at < :before;

-- name: worker_list
SELECT w.worker_id, w.queues, w.first_seen_at, w.last_seen_at, coalesce(r.n, 0) AS leases
FROM workers AS w
LEFT JOIN (
    SELECT worker_id, count(*) AS n FROM tasks
    WHERE tenant_id = :tenant_id AND status = 'running' AND target_type = 'worker'
    GROUP BY worker_id
) AS r ON r.worker_id = w.worker_id
WHERE w.tenant_id = :tenant_id AND w.last_seen_at >= :since
ORDER BY w.worker_id;
