-- Running tasks by (tenant, queue, key), for the claims of limited queues: their room is
-- max_concurrency less the queue's running tasks (limited_room) and, with
-- max_concurrency_per_key, each key's (task_claim_keyed's busy). Those counts read every running
-- task of the tenant before, whatever its queue: 15-30 ms per claim with 100,000 running
-- elsewhere (benchmarks/plan_backlog.py). This index gives the queue's own, which its limit
-- keeps few. A task pays one entry while it runs (claim and heartbeat), as it does in
-- tasks_lease_expiry_idx and tasks_lease_id_idx.
-- "queue IS NOT NULL" holds for every row (the column is NOT NULL); it is there so that only a
-- statement that names a queue (queue = ..., which implies it) may use the index. Without it,
-- statistics that say nothing runs made the generic plan of a lookup by lease id scan this
-- index instead of probing tasks_lease_id_idx (tests/store/test_postgres_queue_plans.py).
CREATE INDEX tasks_running_queue_idx ON tasks (tenant_id, queue, concurrency_key)
    WHERE status = 'running' AND queue IS NOT NULL;
