-- Ready tasks that carry a concurrency_key, by (tenant, queue, key) in each key's claim order
-- (priority, due, creation, id), for task_claim_keyed: a key's first ready tasks are one probe,
-- and the keys of a queue one probe each (a skip scan). Partial: tasks without a key (every task
-- of a queue without max_concurrency_per_key, as a rule) are never written to it, so the plain
-- claim path pays nothing for it; a keyed task pays one index entry while it is ready.
CREATE INDEX tasks_ready_keyed_idx
    ON tasks (tenant_id, queue, concurrency_key, priority DESC, due_at, created_at, id)
    WHERE status = 'ready' AND concurrency_key IS NOT NULL;
