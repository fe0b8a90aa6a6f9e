-- The push index led by (tenant, queue): a claim visits each (tenant, queue) with ready push work
-- with one index probe (a skip scan), so the tasks a paused or limited queue holds back cost a
-- claim nothing, however many there are. Led by the tenant alone (0012), the claim for queues
-- without limits walked every held task of the tenant before finding none (5,000 held tasks:
-- 20 ms per claim, which kept limited queues from draining at their limit). A tenant's share
-- is taken from each of its claimable queues in this index's order and merged by priority.
DROP INDEX tasks_ready_push_idx;
CREATE INDEX tasks_ready_push_idx ON tasks (tenant_id, queue, priority DESC, due_at)
    WHERE status = 'ready' AND target_type <> 'worker';
