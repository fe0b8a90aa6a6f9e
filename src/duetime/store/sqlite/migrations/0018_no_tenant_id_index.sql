-- PostgreSQL's migration of this version drops tasks_tenant_idx and lists a tenant's tasks from
-- one page of each status, walked in tasks_tenant_status_idx. SQLite keeps tasks_tenant: its task
-- updates are cheap next to its single writer's commit, and task_list's plan here reads it.
-- Nothing changes; the version exists so both backends ship the same ones.
SELECT 1;
