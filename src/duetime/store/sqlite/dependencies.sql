-- What a parent's end does to its dependents (plans in duetime/store/core/dependencies.py).

-- Parents failed or were cancelled: every blocked descendant fails (a dependent that is not
-- blocked has already been released or ended, and so shields its own dependents).
-- name: task_deps_fail
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
    last_error = :error
WHERE id IN (SELECT id FROM doomed) AND status = 'blocked';
