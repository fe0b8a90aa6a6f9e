-- What an attempt leaves behind besides its outcome (SPEC §8 "Audit trail", SPEC §4): the
-- PostgreSQL migration's twin. logs: up to 64 KiB of text a worker attaches when it completes
-- or fails a lease; response: the first 4 KiB of a webhook target's answer body, on every
-- attempt that got one. The history copies them.
ALTER TABLE attempts ADD COLUMN logs TEXT;
ALTER TABLE attempts ADD COLUMN response TEXT;
ALTER TABLE history ADD COLUMN logs TEXT;
ALTER TABLE history ADD COLUMN response TEXT;

DROP TRIGGER attempts_history_insert;
CREATE TRIGGER attempts_history_insert AFTER INSERT ON attempts
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels, actor,
                         attempt, started_at, outcome, error, http_status, duration_ms, worker,
                         logs, response)
    SELECT NEW.finished_at, t.tenant_id, 'attempt', NEW.task_id, t.schedule_id, t.name, t.queue,
           t.labels, coalesce('worker:' || NEW.worker, 'node'), NEW.number, NEW.started_at,
           NEW.outcome, NEW.error, NEW.http_status, NEW.duration_ms, NEW.worker, NEW.logs,
           NEW.response
    FROM tasks t WHERE t.id = NEW.task_id;
END;
