-- What follows a task's end (plans in duetime/store/core/follow.py). Conventions as in
-- queries.sql; "now" is coalesce(:now::timestamptz, now()).

-- name: follow_deps_count_off
-- Parents :parent_ids ended in a way their children count off (succeeded; or failed, for the
-- children :child_ids whose on_parent_failure is "run"; NULL: every child): each blocked child
-- loses as many pending parents; with none left it becomes ready or scheduled by its due_at.
WITH d AS (
    SELECT child_id, count(*)::int AS n FROM task_deps
    WHERE parent_id = ANY(:parent_ids::uuid[])
      AND (:child_ids::uuid[] IS NULL OR child_id = ANY(:child_ids::uuid[]))
    GROUP BY child_id
)
UPDATE tasks t SET
    pending_parents = greatest(t.pending_parents - d.n, 0),
    status = CASE WHEN t.pending_parents - d.n > 0 THEN 'blocked'
                  WHEN t.due_at <= coalesce(:now::timestamptz, now()) THEN 'ready'
                  ELSE 'scheduled' END,
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
FROM d
WHERE t.id = ANY(ARRAY(SELECT child_id FROM d)) AND t.id = d.child_id
  AND t.status = 'blocked'
RETURNING t.id, t.status;

-- name: follow_deps_children
-- The blocked children of parents that failed or were cancelled, each with what its
-- on_parent_failure says (no task_follow row: "fail").
SELECT DISTINCT d.child_id AS id, coalesce(f.on_parent_failure, 'fail') AS policy
FROM task_deps d
JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
LEFT JOIN task_follow f ON f.task_id = d.child_id
WHERE d.parent_id = ANY(:parent_ids::uuid[]);

-- name: follow_deps_end
-- Blocked children a parent's failure ends, failed or cancelled (:status).
UPDATE tasks t SET
    status = :status,
    last_error = :error,
    finished_at = coalesce(:now::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(:ids::uuid[]) AND t.status = 'blocked'
RETURNING t.id, t.has_dependents;

-- name: follow_callbacks_due
-- Ended tasks with callbacks: what their callbacks carry (a result only up to :inline bytes).
SELECT t.id, t.tenant_id, t.name, t.queue, t.status, t.version, t.attempts, t.priority, t.labels,
       t.finished_at, t.last_error,
       CASE WHEN octet_length(t.result) <= :inline::int THEN t.result END AS result,
       octet_length(t.result) AS result_bytes,
       f.callbacks, f.workflow_id, f.ref
FROM task_follow f JOIN tasks t ON t.id = f.task_id
WHERE f.task_id = ANY(:ids::uuid[]) AND f.callbacks IS NOT NULL;

-- name: follow_insert
-- (batch) The task_follow rows of tasks a graph create makes.
INSERT INTO task_follow (task_id, tenant_id, on_parent_failure, parents_in_body, callbacks,
                         workflow_id, ref, spawned_by)
SELECT * FROM unnest(:task_id::uuid[], :tenant_id::text[], :on_parent_failure::text[],
                     :parents_in_body::boolean[], :callbacks::jsonb[], :workflow_id::uuid[],
                     :ref::text[], :spawned_by::uuid[]);

-- name: follow_parents_of
-- The parents of tasks :ids of :tenant_id, each with its ref and its result (only up to
-- :inline bytes; result_bytes says how large it is), and whether the child wants them in
-- its body.
SELECT c.id AS child_id, p.id, p.name, p.status, p.last_error, p.finished_at, pf.ref,
       CASE WHEN octet_length(p.result) <= :inline::int THEN p.result END AS result,
       octet_length(p.result) AS result_bytes,
       coalesce(cf.parents_in_body, false) AS parents_in_body
FROM tasks c
CROSS JOIN LATERAL unnest(c.depends_on) AS d (parent_id)
JOIN tasks p ON p.id = d.parent_id
LEFT JOIN task_follow pf ON pf.task_id = p.id
LEFT JOIN task_follow cf ON cf.task_id = c.id
WHERE c.id = ANY(:ids::uuid[]) AND c.tenant_id = :tenant_id;

-- name: follow_statuses
SELECT id, status FROM tasks WHERE id = ANY(:ids::uuid[]);

-- name: follow_children
-- The tasks a parent's handler spawned, oldest first.
SELECT t.* FROM task_follow f JOIN tasks t ON t.id = f.task_id
WHERE f.spawned_by = :parent_id::uuid AND f.tenant_id = :tenant_id
ORDER BY f.task_id;

-- name: follow_tasks_get
-- Tasks by id, any tenant's (waits checked theirs first).
SELECT * FROM tasks WHERE id = ANY(:ids::uuid[]);
