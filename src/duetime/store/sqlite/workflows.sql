-- Workflows (plans in duetime/store/core/workflows.py); as in PostgreSQL's.

-- name: workflow_insert
INSERT INTO workflows (id, tenant_id, name, labels, node_count, idempotency_key, request_hash,
                       created_at)
VALUES (:id, :tenant_id, :name, :labels, :node_count, :idempotency_key, :request_hash, :now)
RETURNING *;

-- name: workflow_by_key
SELECT * FROM workflows WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: workflow_get
SELECT * FROM workflows WHERE id = :id AND tenant_id = :tenant_id;

-- name: workflow_nodes
SELECT t.*, f.ref FROM task_follow AS f JOIN tasks AS t ON t.id = f.task_id
WHERE f.workflow_id = :id
ORDER BY f.task_id;

-- name: workflow_list
SELECT w.*, coalesce((
    SELECT json_group_object(s.status, s.n) FROM (
        SELECT t.status, count(*) AS n FROM task_follow AS f JOIN tasks AS t ON t.id = f.task_id
        WHERE f.workflow_id = w.id GROUP BY t.status) AS s
), '{}') AS counts
FROM workflows AS w
WHERE w.tenant_id = :tenant_id AND (:cursor IS NULL OR w.id < :cursor)
ORDER BY w.id DESC
LIMIT :limit;

-- name: workflow_cancel_waiting
UPDATE tasks SET
    status = 'cancelled',
    finished_at = :now,
    version = version + 1,
    updated_at = :now
WHERE id IN (SELECT task_id FROM task_follow WHERE workflow_id = :id)
  AND status IN ('scheduled', 'blocked', 'ready', 'retrying')
RETURNING id, status, has_dependents;

-- name: workflow_cancel_running
UPDATE tasks SET
    cancel_requested = 1,
    version = version + 1,
    updated_at = :now
WHERE id IN (SELECT task_id FROM task_follow WHERE workflow_id = :id)
  AND status = 'running' AND cancel_requested = 0;

-- name: workflow_lock_nodes
-- One writer: nothing to lock.
SELECT task_id AS id FROM task_follow WHERE workflow_id = :id ORDER BY task_id;

-- name: workflow_replay
WITH doomed AS (
    SELECT n.id, (SELECT count(*) FROM tasks AS p
                  WHERE p.id IN (SELECT value FROM json_each(n.depends_on))
                    AND p.status <> 'succeeded') AS pending
    FROM tasks AS n
    WHERE n.id IN (SELECT task_id FROM task_follow WHERE workflow_id = :id)
      AND n.status IN ('failed', 'cancelled')
)
UPDATE tasks SET
    status = CASE WHEN d.pending = 0 THEN 'ready' ELSE 'blocked' END,
    pending_parents = d.pending,
    series_start = attempts,
    due_at = :now,
    last_error = NULL,
    result = NULL,
    finished_at = NULL,
    cancel_requested = 0,
    version = version + 1,
    updated_at = :now
FROM doomed AS d
WHERE tasks.id = d.id
RETURNING tasks.id, tasks.status;
