-- The month export's page (duetime/store/sqlite/history.py; not a plan's: PostgreSQL streams a
-- server-side cursor instead, postgres/history_export.sql).

-- A month for the archive, a page at a time after the last row of the page before: grouped by
-- tenant, then by name, each name's records by time (the order of the Parquet files).
-- name: history_month_rows
SELECT * FROM history
WHERE at >= :lo AND at < :hi
  AND (tenant_id, coalesce(name, ''), at, id) > (:tenant_id, :name, :at, :id)
ORDER BY tenant_id, coalesce(name, ''), at, id
LIMIT :limit;
