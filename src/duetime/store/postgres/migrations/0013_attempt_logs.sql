-- What an attempt leaves behind besides its outcome (SPEC §8 "Audit trail", SPEC §4):
-- logs: up to 64 KiB of text a worker attaches when it completes or fails a lease;
-- response: the first 4 KiB of a webhook target's answer body, on every attempt that got one
-- (success or failure; the task's `result` keeps a success's body as JSON, the attempt's
-- `error` only a one-line snippet). Both NULL when absent, so completions without them write
-- nothing more. The history copies them (GET /v1/tasks/{id}/attempts after retention, the
-- cold tier's Parquet files).
ALTER TABLE attempts ADD COLUMN logs text, ADD COLUMN response text;
ALTER TABLE history ADD COLUMN logs text, ADD COLUMN response text;
ALTER TYPE task_completion ADD ATTRIBUTE logs text, ADD ATTRIBUTE response text;

CREATE OR REPLACE FUNCTION history_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (at, tenant_id, kind, task_id, schedule_id, name, queue, labels, actor,
                         attempt, started_at, outcome, error, http_status, duration_ms, worker,
                         logs, response)
    SELECT a.finished_at, t.tenant_id, 'attempt', a.task_id, t.schedule_id, t.name, t.queue,
           t.labels, coalesce('worker:' || a.worker, 'node'), a.number, a.started_at, a.outcome,
           a.error, a.http_status, a.duration_ms, a.worker, a.logs, a.response
    FROM new_rows a JOIN tasks t ON t.id = a.task_id;
    RETURN NULL;
END
$$;
