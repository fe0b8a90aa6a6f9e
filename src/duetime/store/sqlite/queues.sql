-- Named queries of the SQLite store for claims on limited queues and the lease API, loaded by
-- duetime.store.sqlite.queues. Conventions as in queries.sql (":now" in microseconds, lists as
-- one JSON text parameter).

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
