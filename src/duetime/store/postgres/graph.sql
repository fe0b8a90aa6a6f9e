-- Tasks that know each other, made in one plan (duetime/store/core/graph.py), and the tasks the
-- store makes itself (callbacks, notifications). Conventions as in queries.sql.

-- name: graph_task_insert
-- (batch) Each task with the status its plan decided (duetime.store.core.graph.starting): a
-- failed or cancelled one ended for a parent, at once. An idempotency key that exists makes
-- nothing (no row back).
INSERT INTO tasks AS t (
    id, tenant_id, name, queue, status, version, target_type, target, payload,
    idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
    has_dependents, concurrency_key, labels, attempts, series_start, run_at, due_at,
    created_at, updated_at, finished_at, last_error, cancel_requested, traceparent,
    request_hash, payload_ref, flow_key)
SELECT
    i.id, i.tenant_id, i.name, i.queue, i.status, 1, i.target_type, i.target::jsonb, i.payload,
    i.idempotency_key, i.priority, i.retry::jsonb, i.timeout_seconds,
    ARRAY(SELECT jsonb_array_elements_text(i.depends_on::jsonb)::uuid), i.pending_parents,
    i.has_dependents, i.concurrency_key, i.labels::jsonb, 0, 0, coalesce(i.run_at, c.now),
    coalesce(i.run_at, c.now), c.now, c.now,
    CASE WHEN i.status IN ('failed', 'cancelled') THEN c.now END, i.last_error, false,
    i.traceparent, i.request_hash, i.payload_ref, i.flow_key
FROM unnest(
    :id::uuid[], :tenant_id::text[], :name::text[], :queue::text[], :status::text[],
    :target_type::text[], :target::text[], :payload::text[], :idempotency_key::text[],
    :priority::integer[], :retry::text[], :timeout_seconds::double precision[],
    :depends_on::text[], :pending_parents::integer[], :has_dependents::boolean[],
    :concurrency_key::text[], :labels::text[], :run_at::timestamptz[], :last_error::text[],
    :traceparent::text[], :request_hash::text[], :payload_ref::text[], :flow_key::text[]
) AS i (id, tenant_id, name, queue, status, target_type, target, payload, idempotency_key,
        priority, retry, timeout_seconds, depends_on, pending_parents, has_dependents,
        concurrency_key, labels, run_at, last_error, traceparent, request_hash, payload_ref,
        flow_key)
CROSS JOIN (SELECT coalesce(:now::timestamptz, now()) AS now) AS c
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING t.id;

-- name: graph_tasks_by_key
SELECT * FROM tasks WHERE tenant_id = :tenant_id AND idempotency_key = ANY(:keys::text[]);

-- name: graph_parents_lock
-- Existing parents, locked in id order (against deadlocks): a parent's completion then waits
-- for our task_deps rows, or we wait and read its end (as the hot path's task_parents_lock).
SELECT id, tenant_id, status, has_dependents FROM tasks
WHERE id = ANY(:ids::uuid[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: graph_parents_mark
UPDATE tasks SET has_dependents = true WHERE id = ANY(:ids::uuid[]) AND NOT has_dependents;

-- name: graph_deps_insert
-- (batch)
INSERT INTO task_deps (parent_id, child_id)
SELECT * FROM unnest(:parent_id::uuid[], :child_id::uuid[])
ON CONFLICT DO NOTHING;
