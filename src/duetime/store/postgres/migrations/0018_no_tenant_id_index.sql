-- tasks_tenant_idx (tenant_id, id DESC) served one read: a tenant's tasks newest first without a
-- status filter (GET /v1/tasks). Every task paid for it four times over: at its insert and at each
-- of its three status changes (scheduled -> ready -> running -> a terminal state), which are never
-- HOT updates (status is in the partial indexes' predicates), so each adds an entry to every index
-- of the table. task_list now reads one page of each status by a backward walk of
-- tasks_tenant_status_idx (tenant_id, status, id) and sorts those pages. PostgreSQL's CPU per task
-- without it (benchmarks/pg_cpu_phases.py, five rounds):
-- create 46.5 -> 42.5 us, promote + claim + ack 215.5 -> 205 us.
DROP INDEX IF EXISTS tasks_tenant_idx;
