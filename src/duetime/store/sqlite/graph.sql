-- Tasks that know each other, made in one plan (duetime/store/core/graph.py); as in
-- PostgreSQL's.

-- name: graph_task_insert
-- (batch)
INSERT INTO tasks (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, run_at, due_at,
    created_at, updated_at, finished_at, last_error, cancel_requested, traceparent,
    request_hash, payload_ref, flow_key
) VALUES (
    :id, :tenant_id, :name, :queue, :status, 1, :target_type, :target, :payload,
    :idempotency_key, :priority, :retry, :timeout_seconds, :depends_on, :pending_parents,
    :has_dependents, :concurrency_key, :labels, 0, 0, coalesce(:run_at, :now),
    coalesce(:run_at, :now), :now, :now,
    CASE WHEN :status IN ('failed', 'cancelled') THEN :now END, :last_error, 0, :traceparent,
    :request_hash, :payload_ref, :flow_key
)
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: graph_tasks_by_key
SELECT * FROM tasks
WHERE tenant_id = :tenant_id AND idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: graph_parents_lock
-- One writer: reading is locking.
SELECT id, tenant_id, status, has_dependents FROM tasks
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;

-- name: graph_parents_mark
UPDATE tasks SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_dependents = 0;

-- name: graph_deps_insert
-- (batch)
INSERT OR IGNORE INTO task_deps (parent_id, child_id) VALUES (:parent_id, :child_id);
