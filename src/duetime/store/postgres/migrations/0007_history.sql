-- History, retention and audit (SPEC §8; docs/history.md).
--
-- history: one row per audit record — a task's state change ('task'), an attempt ('attempt'), a
-- schedule change ('schedule') — with the task's name, queue and labels copied in, so history
-- answers after the task itself has left the hot store. Partitioned by time: the maintenance
-- service creates monthly partitions ahead; rows outside every partition land in the default one.
--
-- The rows are written by triggers in the same transaction as the change they record, so the
-- store's statements (create, claim, complete, ...) stay as they are. The triggers are statement
-- level with transition tables: one INSERT ... SELECT per statement, not one call per row.
-- Who made a change: the transaction's `duetime.actor` setting (set by the store for API calls),
-- else the lease holder (worker) for claims and completions, else 'node'.

CREATE SEQUENCE history_id_seq;

CREATE TABLE history (
    at           timestamptz NOT NULL,
    id           bigint NOT NULL DEFAULT nextval('history_id_seq'),
    tenant_id    text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('task', 'attempt', 'schedule')),
    task_id      uuid,
    schedule_id  text,
    name         text,
    queue        text,
    labels       jsonb,
    from_status  text,
    to_status    text,
    actor        text,
    fields       jsonb,
    attempt      integer,
    started_at   timestamptz,
    outcome      text,
    error        text,
    http_status  integer,
    duration_ms  double precision,
    worker       text
) PARTITION BY RANGE (at);
ALTER SEQUENCE history_id_seq OWNED BY history.id;

CREATE TABLE history_default PARTITION OF history DEFAULT;

-- GET /v1/history: a tenant's records newest first, narrowed by name (the SPEC §6 query), or one
-- task's records (GET /v1/tasks/{id}/attempts after the task was retired).
CREATE INDEX history_tenant_idx ON history (tenant_id, at DESC, id DESC);
CREATE INDEX history_name_idx ON history (tenant_id, name, at DESC, id DESC);
CREATE INDEX history_task_idx ON history (task_id, at DESC, id DESC);

-- Monthly partitions, made ahead by the leader (history_partition_ensure) and retired after
-- export (history_partition_drop): DETACH and DROP, never a mass DELETE. Rows that reached the
-- default partition for want of a partition (a leader down for months, or a month made after
-- the fact) move into the new partition when it is made. Identifiers are built here, with %I.
CREATE FUNCTION history_partition_ensure(month date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := 'history_p' || to_char(month, 'YYYYMM');
    lo timestamptz := (date_trunc('month', month)::timestamp AT TIME ZONE 'UTC');
    hi timestamptz := ((date_trunc('month', month) + interval '1 month')::timestamp
                       AT TIME ZONE 'UTC');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('duetime.history_partitions'));
    PERFORM set_config('lock_timeout', '2s', true);
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    -- With the constraint in place, ATTACH need not scan the new table.
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (at >= %L AND at < %L)',
                   part, part || '_range', lo, hi);
    EXECUTE format('INSERT INTO %I SELECT * FROM history_default WHERE at >= %L AND at < %L',
                   part, lo, hi);
    DELETE FROM history_default WHERE at >= lo AND at < hi;
    EXECUTE format('ALTER TABLE history ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   part, lo, hi);
    RETURN true;
END
$$;

CREATE FUNCTION history_partition_drop(month date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := 'history_p' || to_char(month, 'YYYYMM');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('duetime.history_partitions'));
    -- DETACH locks the parent briefly against every write that records history: wait for it at
    -- most 2 s (the hot path queues behind a waiting DETACH), else fail and retry next round.
    PERFORM set_config('lock_timeout', '2s', true);
    IF to_regclass(part) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE history DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN true;
END
$$;

CREATE FUNCTION duetime_actor() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT nullif(current_setting('duetime.actor', true), '')
$$;

CREATE FUNCTION history_tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels,
                         to_status, actor)
    SELECT n.created_at, n.tenant_id, 'task', n.id, n.schedule_id, n.name, n.queue, n.labels,
           n.status,
           coalesce(duetime_actor(),
                    CASE WHEN n.schedule_id IS NULL THEN 'api' ELSE 'schedule:' || n.schedule_id END)
    FROM new_rows n;
    RETURN NULL;
END
$$;

-- The join of the two transition tables has no statistics, and the dispatcher's claim runs with
-- enable_sort off: the planner then chose a nested loop (N x N comparisons per statement), which
-- cut the http burst from ~12,600 to ~1,950 tasks/s. A hash join is always right here.
CREATE FUNCTION history_tasks_updated() RETURNS trigger LANGUAGE plpgsql
    SET enable_nestloop = off SET enable_sort = on AS $$
DECLARE
    who text := duetime_actor();
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels,
                         from_status, to_status, actor, fields)
    SELECT n.updated_at, n.tenant_id, 'task', n.id, n.schedule_id, n.name, n.queue, n.labels,
           o.status, n.status,
           coalesce(who,
                    CASE WHEN n.status = 'running' AND o.status <> 'running'
                              THEN 'worker:' || coalesce(n.worker_id, '?')
                         WHEN o.status = 'running' AND o.worker_id IS NOT NULL
                              THEN 'worker:' || o.worker_id
                         ELSE 'node' END),
           -- Most updates only move the status: skip building the diff for them.
           CASE WHEN who IS NULL AND n.run_at = o.run_at AND n.priority = o.priority
                     AND n.labels = o.labels AND n.cancel_requested = o.cancel_requested
                THEN NULL ELSE
           nullif(jsonb_strip_nulls(jsonb_build_object(
               'run_at', CASE WHEN n.run_at <> o.run_at
                              THEN jsonb_build_array(o.run_at, n.run_at) END,
               'priority', CASE WHEN n.priority <> o.priority
                                THEN jsonb_build_array(o.priority, n.priority) END,
               'labels', CASE WHEN n.labels <> o.labels
                              THEN jsonb_build_array(o.labels, n.labels) END,
               -- Payloads are compared only for API calls: detoasting on the hot path costs.
               'payload', CASE WHEN who IS NOT NULL AND n.payload <> o.payload
                               THEN to_jsonb('changed'::text) END,
               'cancel_requested', CASE WHEN n.cancel_requested AND NOT o.cancel_requested
                                        THEN to_jsonb(true) END
           )), '{}'::jsonb) END
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status <> o.status OR n.run_at <> o.run_at OR n.priority <> o.priority
       OR n.labels <> o.labels OR n.cancel_requested <> o.cancel_requested
       OR (who IS NOT NULL AND n.payload <> o.payload);
    RETURN NULL;
END
$$;

CREATE FUNCTION history_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels, actor,
                         attempt, started_at, outcome, error, http_status, duration_ms, worker)
    SELECT a.finished_at, t.tenant_id, 'attempt', a.task_id, t.schedule_id, t.name, t.queue,
           t.labels, coalesce('worker:' || a.worker, 'node'), a.number, a.started_at, a.outcome,
           a.error,
           a.http_status, a.duration_ms, a.worker
    FROM new_rows a JOIN tasks t ON t.id = a.task_id;
    RETURN NULL;
END
$$;

CREATE FUNCTION history_revisions_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (at, tenant_id, kind, schedule_id, name, queue, to_status, actor, fields)
    SELECT r.at, s.tenant_id, 'schedule', r.schedule_id, s.task ->> 'name',
           coalesce(s.task ->> 'queue', 'default'), r.action, coalesce(r.actor, 'api'),
           (SELECT jsonb_object_agg(k, jsonb_build_array(r.before -> k, r.after -> k))
            FROM (SELECT jsonb_object_keys(r.before) UNION SELECT jsonb_object_keys(r.after)) AS ks (k)
            WHERE (r.before -> k) IS DISTINCT FROM (r.after -> k))
    FROM new_rows r JOIN schedules s ON s.id = r.schedule_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_history_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_tasks_inserted();
CREATE TRIGGER tasks_history_update AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_tasks_updated();
CREATE TRIGGER attempts_history_insert AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_attempts_inserted();
CREATE TRIGGER schedule_revisions_history_insert AFTER INSERT ON schedule_revisions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION history_revisions_inserted();

-- Retention: per-queue periods (seconds; NULL = the configured default), and the sweep's
-- reader — finished tasks by finish time (paid only on the transition into a final status).
CREATE TABLE queue_retention (
    tenant_id          text NOT NULL,
    queue              text NOT NULL,
    succeeded_seconds  double precision,
    failed_seconds     double precision,
    cancelled_seconds  double precision,
    PRIMARY KEY (tenant_id, queue)
);
CREATE INDEX tasks_finished_idx ON tasks (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');
