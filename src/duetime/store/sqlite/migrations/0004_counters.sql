-- Task counts by (tenant, queue, status), kept with every change to tasks, so queue figures and
-- /metrics never count the task table. SQLite has one writer, so row triggers update the
-- counter directly (no contention to avoid). Rows that reach 0 stay until the leader's
-- maintenance round removes them; readers skip them.

CREATE TABLE task_counts (
    tenant_id  TEXT NOT NULL,
    queue      TEXT NOT NULL,
    status     TEXT NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, queue, status)
) WITHOUT ROWID;

INSERT INTO task_counts (tenant_id, queue, status, n)
SELECT tenant_id, queue, status, count(*) FROM tasks GROUP BY 1, 2, 3;

CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks
BEGIN
    INSERT INTO task_counts (tenant_id, queue, status, n)
    VALUES (new.tenant_id, new.queue, new.status, 1)
    ON CONFLICT (tenant_id, queue, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks
BEGIN
    UPDATE task_counts SET n = n - 1
    WHERE tenant_id = old.tenant_id AND queue = old.queue AND status = old.status;
END;

CREATE TRIGGER task_counts_update AFTER UPDATE OF tenant_id, queue, status ON tasks
WHEN old.status IS NOT new.status OR old.queue IS NOT new.queue
  OR old.tenant_id IS NOT new.tenant_id
BEGIN
    UPDATE task_counts SET n = n - 1
    WHERE tenant_id = old.tenant_id AND queue = old.queue AND status = old.status;
    INSERT INTO task_counts (tenant_id, queue, status, n)
    VALUES (new.tenant_id, new.queue, new.status, 1)
    ON CONFLICT (tenant_id, queue, status) DO UPDATE SET n = n + 1;
END;
