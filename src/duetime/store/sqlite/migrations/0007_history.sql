-- History, retention and audit (SPEC §8; docs/history.md). The PostgreSQL schema's twin, with
-- what SQLite can do: one history table (no partitions), row-level triggers. The actor of an API
-- change is the one row of audit_actor, written at the start of that write transaction and
-- deleted before it commits (SQLite has one writer, so no other transaction can see it); with no
-- row the triggers name the actor themselves. Any connection can write tasks (no function to
-- register).

CREATE TABLE audit_actor (
    id     INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    actor  TEXT    NOT NULL
) STRICT;

CREATE TABLE history (
    id           INTEGER NOT NULL PRIMARY KEY,
    at           INTEGER NOT NULL,
    tenant_id    TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    task_id      TEXT,
    schedule_id  TEXT,
    name         TEXT,
    queue        TEXT,
    labels       TEXT,
    from_status  TEXT,
    to_status    TEXT,
    actor        TEXT,
    fields       TEXT,
    attempt      INTEGER,
    started_at   INTEGER,
    outcome      TEXT,
    error        TEXT,
    http_status  INTEGER,
    duration_ms  REAL,
    worker       TEXT
) STRICT;
CREATE INDEX history_tenant ON history (tenant_id, at DESC, id DESC);
CREATE INDEX history_name ON history (tenant_id, name, at DESC, id DESC);
CREATE INDEX history_task ON history (task_id, at DESC, id DESC);
-- Export: the months that hold records, and a month's records.
CREATE INDEX history_at ON history (at);

CREATE TRIGGER tasks_history_insert AFTER INSERT ON tasks
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels,
                         to_status, actor)
    VALUES (NEW.created_at, NEW.tenant_id, 'task', NEW.id, NEW.schedule_id, NEW.name, NEW.queue,
            NEW.labels, NEW.status,
            coalesce((SELECT actor FROM audit_actor), CASE WHEN NEW.schedule_id IS NULL THEN 'api'
                                           ELSE 'schedule:' || NEW.schedule_id END));
END;

CREATE TRIGGER tasks_history_update AFTER UPDATE ON tasks
WHEN NEW.status <> OLD.status OR NEW.run_at <> OLD.run_at OR NEW.priority <> OLD.priority
  OR NEW.labels <> OLD.labels OR NEW.cancel_requested <> OLD.cancel_requested
  OR ((SELECT actor FROM audit_actor) IS NOT NULL AND NEW.payload <> OLD.payload)
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels,
                         from_status, to_status, actor, fields)
    VALUES (NEW.updated_at, NEW.tenant_id, 'task', NEW.id, NEW.schedule_id, NEW.name, NEW.queue,
            NEW.labels, OLD.status, NEW.status,
            coalesce((SELECT actor FROM audit_actor),
                     CASE WHEN NEW.status = 'running' AND OLD.status <> 'running'
                               THEN 'worker:' || coalesce(NEW.worker_id, '?')
                          WHEN OLD.status = 'running' AND OLD.worker_id IS NOT NULL
                               THEN 'worker:' || OLD.worker_id
                          ELSE 'node' END),
            nullif(json_patch('{}', json_object(
                'run_at', CASE WHEN NEW.run_at <> OLD.run_at
                               THEN json_array(OLD.run_at, NEW.run_at) END,
                'priority', CASE WHEN NEW.priority <> OLD.priority
                                 THEN json_array(OLD.priority, NEW.priority) END,
                'labels', CASE WHEN NEW.labels <> OLD.labels
                               THEN json_array(json(OLD.labels), json(NEW.labels)) END,
                'payload', CASE WHEN (SELECT actor FROM audit_actor) IS NOT NULL AND NEW.payload <> OLD.payload
                                THEN 'changed' END,
                'cancel_requested', CASE WHEN NEW.cancel_requested AND NOT OLD.cancel_requested
                                         THEN json('true') END
            )), '{}'));
END;

CREATE TRIGGER attempts_history_insert AFTER INSERT ON attempts
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels, actor,
                         attempt, started_at, outcome, error, http_status, duration_ms, worker)
    SELECT NEW.finished_at, t.tenant_id, 'attempt', NEW.task_id, t.schedule_id, t.name, t.queue,
           t.labels, coalesce('worker:' || NEW.worker, 'node'), NEW.number, NEW.started_at,
           NEW.outcome, NEW.error, NEW.http_status, NEW.duration_ms, NEW.worker
    FROM tasks t WHERE t.id = NEW.task_id;
END;

CREATE TRIGGER schedule_revisions_history_insert AFTER INSERT ON schedule_revisions
BEGIN
    INSERT INTO history (at, tenant_id, kind, schedule_id, name, queue, to_status, actor, fields)
    SELECT NEW.at, s.tenant_id, 'schedule', NEW.schedule_id, json_extract(s.task, '$.name'),
           coalesce(json_extract(s.task, '$.queue'), 'default'), NEW.action,
           coalesce(NEW.actor, 'api'),
           (SELECT json_group_object(k, json_array(json_extract(NEW.before, '$.' || k),
                                                   json_extract(NEW.after, '$.' || k)))
            FROM (SELECT key AS k FROM json_each(NEW.before)
                  UNION SELECT key FROM json_each(NEW.after))
            WHERE json_extract(NEW.before, '$.' || k) IS NOT json_extract(NEW.after, '$.' || k))
    FROM schedules s WHERE s.id = NEW.schedule_id;
END;

CREATE TABLE queue_retention (
    tenant_id          TEXT NOT NULL,
    queue              TEXT NOT NULL,
    succeeded_seconds  REAL,
    failed_seconds     REAL,
    cancelled_seconds  REAL,
    PRIMARY KEY (tenant_id, queue)
) STRICT;
CREATE INDEX tasks_finished ON tasks (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');
