-- The month export's pages (duetime/store/postgres/history.py; not plans: a page's key depends
-- on the page before). Each page is its own statement, so an export that pauses while the hot
-- path is busy holds no snapshot (which would keep VACUUM from the hot tables).
--
-- Order: grouped by tenant, then by name, each name's records by time (the order of the
-- Parquet files, so a name's records share row groups), which is history_name_idx
-- (tenant_id, name NULLS FIRST, at, id) read forwards: tenants and names ascending, each
-- tenant's unnamed records first, time ascending. A page finishes the current (tenant, name)
-- group (history_month_group*), then goes on into the groups after it (history_month_after*),
-- each by an index range, never by skipping rows (tests/store/test_postgres_specific.py).

-- fragment: export_columns
SELECT at, id, tenant_id, kind, task_id::text AS task_id, schedule_id, name, queue,
       labels::text AS labels, from_status, to_status, actor, fields::text AS fields, attempt,
       started_at, outcome, error, http_status, duration_ms, worker, logs, response
FROM history

-- The first page.
-- name: history_month_first
-- include: export_columns
WHERE at >= :lo AND at < :hi
ORDER BY tenant_id, name NULLS FIRST, at, id
LIMIT :limit;

-- The rest of a named group after (at, id).
-- name: history_month_group
-- include: export_columns
WHERE at >= :lo AND at < :hi AND tenant_id = :tenant_id AND name = :name
  AND at >= :at AND (at > :at OR id > :id)
ORDER BY at, id
LIMIT :limit;

-- The rest of a tenant's unnamed group after (at, id).
-- name: history_month_group_null
-- include: export_columns
WHERE at >= :lo AND at < :hi AND tenant_id = :tenant_id AND name IS NULL
  AND at >= :at AND (at > :at OR id > :id)
ORDER BY at, id
LIMIT :limit;

-- The groups after a named group: the tenant's larger names, then the tenants above (the
-- tenant's unnamed records came first; a NULL name never passes the row comparison).
-- name: history_month_after
-- include: export_columns
WHERE at >= :lo AND at < :hi AND (tenant_id, name) > (:tenant_id, :name)
ORDER BY tenant_id, name NULLS FIRST, at, id
LIMIT :limit;

-- The groups after a tenant's unnamed group: all its names, then the tenants above.
-- name: history_month_after_null
-- include: export_columns
WHERE at >= :lo AND at < :hi AND tenant_id >= :tenant_id
  AND (tenant_id > :tenant_id OR name IS NOT NULL)
ORDER BY tenant_id, name NULLS FIRST, at, id
LIMIT :limit;
