-- The push index led by (tenant, queue), as in the PostgreSQL migration: claims skip the tasks
-- paused and limited queues hold back with one index probe per (tenant, queue).
DROP INDEX tasks_ready_push;
CREATE INDEX tasks_ready_push ON tasks (tenant_id, queue, priority DESC, due_at)
    WHERE status = 'ready' AND target_type <> 'worker';
