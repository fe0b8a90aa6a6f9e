-- What a parent's end does to its dependents (plans in duetime/store/core/dependencies.py).

-- Parents failed or were cancelled: every blocked descendant fails (transitively).
-- name: task_deps_fail
WITH RECURSIVE doomed(id) AS (
    SELECT d.child_id FROM task_deps d
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
    WHERE d.parent_id = ANY(:parent_ids::uuid[])
  UNION
    SELECT d.child_id FROM doomed
    JOIN task_deps d ON d.parent_id = doomed.id
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
)
UPDATE tasks t SET
    status = 'failed',
    last_error = :error,
    finished_at = coalesce(:now::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id IN (SELECT id FROM doomed) AND t.status = 'blocked';
