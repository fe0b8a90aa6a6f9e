-- tasks_lease_id_idx on the lease ids themselves (lease_id IS NOT NULL: tasks_lease_is_running
-- makes that "running"), so a probe by lease id names no status. While it was partial on
-- status = 'running', every such probe also qualified for tasks_lease_expiry_idx, which
-- statistics taken while nothing ran made look as cheap: 500 acks then walked every running task
-- once per lease id (~30 ms against ~0.7 ms; tests/store/test_postgres_queue_plans.py).
DROP INDEX IF EXISTS tasks_lease_id_idx;
CREATE INDEX tasks_lease_id_idx ON tasks (lease_id) WHERE lease_id IS NOT NULL;
