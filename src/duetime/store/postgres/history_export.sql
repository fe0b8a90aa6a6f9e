-- The month export's cursor (duetime/store/postgres/history.py; not a plan's: SQLite reads keyset
-- pages instead, sqlite/history_export.sql).

-- A month for the archive: grouped by tenant, then by name, each name's records by time (the
-- order of the Parquet files, so a name's records share row groups). The direction lets the
-- (tenant_id, name, at DESC, id DESC) index be read backwards instead of sorting the month.
-- name: history_month_rows
SELECT at, id, tenant_id, kind, task_id::text AS task_id, schedule_id, name, queue,
       labels::text AS labels, from_status, to_status, actor, fields::text AS fields, attempt,
       started_at, outcome, error, http_status, duration_ms, worker, logs, response
FROM history WHERE at >= :lo AND at < :hi
ORDER BY tenant_id DESC, name DESC NULLS FIRST, at, id;
