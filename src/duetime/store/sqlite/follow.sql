-- What follows a task's end (plans in duetime/store/core/follow.py); as in PostgreSQL's.

-- name: follow_deps_count_off
-- Parents :parent_ids ended in a way their children count off (succeeded; or failed, for the
-- children :child_ids whose on_parent_failure is "run"; NULL: every child).
WITH d AS (
    SELECT child_id, count(*) AS n FROM task_deps
    WHERE parent_id IN (SELECT value FROM json_each(:parent_ids))
      AND (:child_ids IS NULL OR child_id IN (SELECT value FROM json_each(:child_ids)))
    GROUP BY child_id
)
UPDATE tasks SET
    pending_parents = max(pending_parents - d.n, 0),
    status = CASE WHEN pending_parents - d.n > 0 THEN 'blocked'
                  WHEN due_at <= :now THEN 'ready'
                  ELSE 'scheduled' END,
    version = version + 1,
    updated_at = :now
FROM d
WHERE tasks.id = d.child_id AND tasks.status = 'blocked'
RETURNING tasks.id, tasks.status;

-- name: follow_deps_children
SELECT DISTINCT d.child_id AS id, coalesce(f.on_parent_failure, 'fail') AS policy
FROM task_deps AS d
JOIN tasks AS c ON c.id = d.child_id AND c.status = 'blocked'
LEFT JOIN task_follow AS f ON f.task_id = d.child_id
WHERE d.parent_id IN (SELECT value FROM json_each(:parent_ids));

-- name: follow_deps_end
UPDATE tasks SET
    status = :status,
    last_error = :error,
    finished_at = :now,
    version = version + 1,
    updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'blocked'
RETURNING id, has_dependents;

-- name: follow_callbacks_due
SELECT t.id, t.tenant_id, t.name, t.queue, t.status, t.version, t.attempts, t.priority, t.labels,
       t.finished_at, t.last_error,
       CASE WHEN length(CAST(t.result AS BLOB)) <= :inline THEN t.result END AS result,
       length(CAST(t.result AS BLOB)) AS result_bytes,
       f.callbacks, f.workflow_id, f.ref
FROM task_follow AS f JOIN tasks AS t ON t.id = f.task_id
WHERE f.task_id IN (SELECT value FROM json_each(:ids)) AND f.callbacks IS NOT NULL;

-- name: follow_insert
-- (batch)
INSERT INTO task_follow (task_id, tenant_id, on_parent_failure, parents_in_body, callbacks,
                         workflow_id, ref, spawned_by)
VALUES (:task_id, :tenant_id, :on_parent_failure, :parents_in_body, :callbacks, :workflow_id,
        :ref, :spawned_by);

-- name: follow_parents_of
SELECT c.id AS child_id, p.id, p.name, p.status, p.last_error, p.finished_at, pf.ref,
       CASE WHEN length(CAST(p.result AS BLOB)) <= :inline THEN p.result END AS result,
       length(CAST(p.result AS BLOB)) AS result_bytes,
       coalesce(cf.parents_in_body, 0) AS parents_in_body
FROM tasks AS c
JOIN json_each(c.depends_on) AS d
JOIN tasks AS p ON p.id = d.value
LEFT JOIN task_follow AS pf ON pf.task_id = p.id
LEFT JOIN task_follow AS cf ON cf.task_id = c.id
WHERE c.id IN (SELECT value FROM json_each(:ids)) AND c.tenant_id = :tenant_id;

-- name: follow_statuses
SELECT id, status FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: follow_children
SELECT t.* FROM task_follow AS f JOIN tasks AS t ON t.id = f.task_id
WHERE f.spawned_by = :parent_id AND f.tenant_id = :tenant_id
ORDER BY f.task_id;

-- name: follow_tasks_get
SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));
