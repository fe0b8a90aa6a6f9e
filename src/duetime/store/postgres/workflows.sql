-- Workflows (plans in duetime/store/core/workflows.py). Conventions as in queries.sql.

-- name: workflow_insert
INSERT INTO workflows (id, tenant_id, name, labels, node_count, idempotency_key, request_hash,
                       created_at)
VALUES (:id, :tenant_id, :name, :labels::jsonb, :node_count, :idempotency_key, :request_hash,
        coalesce(:now::timestamptz, now()))
RETURNING *;

-- name: workflow_by_key
SELECT * FROM workflows WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: workflow_get
SELECT * FROM workflows WHERE id = :id::uuid AND tenant_id = :tenant_id;

-- name: workflow_nodes
-- Every node's task and ref, in creation order.
SELECT t.*, f.ref FROM task_follow f JOIN tasks t ON t.id = f.task_id
WHERE f.workflow_id = :id::uuid
ORDER BY f.task_id;

-- name: workflow_list
-- A page of a tenant's workflows, newest first, each with its nodes' counts by status.
SELECT w.*, coalesce(c.counts, '{}') AS counts
FROM workflows w
CROSS JOIN LATERAL (
    SELECT jsonb_object_agg(s.status, s.n) AS counts FROM (
        SELECT t.status, count(*) AS n FROM task_follow f JOIN tasks t ON t.id = f.task_id
        WHERE f.workflow_id = w.id GROUP BY t.status) AS s
) AS c
WHERE w.tenant_id = :tenant_id AND (:cursor::uuid IS NULL OR w.id < :cursor::uuid)
ORDER BY w.id DESC
LIMIT :limit;

-- name: workflow_cancel_waiting
-- A workflow's nodes still waiting end cancelled at once.
UPDATE tasks t SET
    status = 'cancelled',
    finished_at = coalesce(:now::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT task_id FROM task_follow WHERE workflow_id = :id::uuid))
  AND t.status IN ('scheduled', 'blocked', 'ready', 'retrying')
RETURNING t.id, t.status, t.has_dependents;

-- name: workflow_cancel_running
-- Its running nodes end cancelled with their attempts (as a cancel of one running task).
UPDATE tasks t SET
    cancel_requested = true,
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT task_id FROM task_follow WHERE workflow_id = :id::uuid))
  AND t.status = 'running' AND NOT t.cancel_requested;

-- name: workflow_lock_nodes
-- Before a replay: every node locked (id order), so a parent ending meanwhile either waits for
-- the replay (and then counts its replayed children off) or has ended when the replay reads it.
SELECT id FROM tasks
WHERE id = ANY(ARRAY(SELECT task_id FROM task_follow WHERE workflow_id = :id::uuid))
ORDER BY id
FOR NO KEY UPDATE;

-- name: workflow_replay
-- Its failed and cancelled nodes start a new attempt series: ready when every parent succeeded,
-- else blocked until those not succeeded (replayed too, or still running) end (their task_deps
-- rows were made with the workflow).
WITH doomed AS (
    SELECT n.id, (SELECT count(*) FROM tasks p
                  WHERE p.id = ANY(n.depends_on) AND p.status <> 'succeeded')::int AS pending
    FROM tasks n
    WHERE n.id = ANY(ARRAY(SELECT task_id FROM task_follow WHERE workflow_id = :id::uuid))
      AND n.status IN ('failed', 'cancelled')
)
UPDATE tasks t SET
    status = CASE WHEN d.pending = 0 THEN 'ready' ELSE 'blocked' END,
    pending_parents = d.pending,
    series_start = t.attempts,
    due_at = coalesce(:now::timestamptz, now()),
    last_error = NULL,
    result = NULL,
    finished_at = NULL,
    cancel_requested = false,
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
FROM doomed d
WHERE t.id = d.id
RETURNING t.id, t.status;
