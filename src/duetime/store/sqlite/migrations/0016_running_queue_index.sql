-- Running tasks by (tenant, queue, key), for the claims of limited queues (queue_running and
-- task_claim_keyed's running count): the queue's own, not every running task of the tenant
-- through tasks_tenant_status. PostgreSQL's migration of this version adds the same index with
-- "AND queue IS NOT NULL" in its predicate, to keep its generic plans of other statements off
-- it; SQLite plans every statement for its own arguments, and with that term its planner
-- preferred tasks_tenant_status for the counts, so it is left out here.
CREATE INDEX tasks_running_queue ON tasks (tenant_id, queue, concurrency_key)
    WHERE status = 'running';
