-- The audit trail written behind (docs/adr/0008-history-written-behind.md): the history triggers
-- of tasks and attempts no longer insert one indexed row per record. Each statement's records go
-- into history_pending as ONE row holding them all (an array of history rows, ids and times
-- assigned as before), in the same transaction as the change they record; the leader's history
-- mover (duetime/engine/history.py) moves them into history in batches, waiting while the node's
-- hot path is busy (at most a few seconds), so a burst does not pay for the history indexes
-- while it drains. Every read of hot history reads history and history_pending together
-- (history.sql, fragment history_rows), in one snapshot: a record is in exactly one of the two.
-- PostgreSQL's CPU per task in a worker burst (benchmarks/pg_cpu_phases.py, ADR 0008):
-- promote + claim + ack 143 -> 98 us; the move costs about what the
-- inserts did, later. Schedule revisions are rare and keep writing history directly.

-- No index: rows are read whole (by the mover, or unnested by a history read) and deleted.
-- The arrays are stored out of line uncompressed: compressing them costs the hot path CPU for
-- rows that live for seconds.
CREATE TABLE history_pending (rows history[] NOT NULL);
ALTER TABLE history_pending ALTER COLUMN rows SET STORAGE EXTERNAL;

-- The row of history each record becomes, in its column order (at, id, tenant_id, kind,
-- task_id, schedule_id, name, queue, labels, from_status, to_status, actor, fields, attempt,
-- started_at, outcome, error, http_status, duration_ms, worker, logs, response).

CREATE OR REPLACE FUNCTION history_tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history_pending (rows)
    SELECT array_agg(ROW(
               n.created_at, nextval('history_id_seq'), n.tenant_id, 'task', n.id, n.schedule_id,
               n.name, n.queue, n.labels, NULL, n.status,
               coalesce(duetime_actor(), CASE WHEN n.schedule_id IS NULL THEN 'api'
                                              ELSE 'schedule:' || n.schedule_id END),
               NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::history)
    FROM new_rows n
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

-- As in 0007: a hash join of the two transition tables, whatever the caller's settings.
CREATE OR REPLACE FUNCTION history_tasks_updated() RETURNS trigger LANGUAGE plpgsql
    SET enable_nestloop = off SET enable_sort = on AS $$
DECLARE
    who text := duetime_actor();
BEGIN
    INSERT INTO history_pending (rows)
    SELECT array_agg(ROW(
               n.updated_at, nextval('history_id_seq'), n.tenant_id, 'task', n.id, n.schedule_id,
               n.name, n.queue, n.labels, o.status, n.status,
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
               )), '{}'::jsonb) END,
               NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::history)
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status <> o.status OR n.run_at <> o.run_at OR n.priority <> o.priority
       OR n.labels <> o.labels OR n.cancel_requested <> o.cancel_requested
       OR (who IS NOT NULL AND n.payload <> o.payload)
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION history_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history_pending (rows)
    SELECT array_agg(ROW(
               a.finished_at, nextval('history_id_seq'), t.tenant_id, 'attempt', a.task_id,
               t.schedule_id, t.name, t.queue, t.labels, NULL, NULL,
               coalesce('worker:' || a.worker, 'node'), NULL, a.number, a.started_at, a.outcome,
               a.error, a.http_status, a.duration_ms, a.worker, a.logs, a.response)::history)
    FROM new_rows a JOIN tasks t ON t.id = a.task_id
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;
