-- History, retention and audit (see migrations/0007_history.sql and docs/history.md).

-- The audit actor of the current transaction (transaction-local: it ends with it).
-- name: actor_set
SELECT set_config('duetime.actor', $1, true);

-- name: queue_retention_put
INSERT INTO queue_retention (tenant_id, queue, succeeded_seconds, failed_seconds,
                             cancelled_seconds)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, queue) DO UPDATE
SET succeeded_seconds = EXCLUDED.succeeded_seconds,
    failed_seconds = EXCLUDED.failed_seconds,
    cancelled_seconds = EXCLUDED.cancelled_seconds;

-- name: queue_retention_delete
DELETE FROM queue_retention WHERE tenant_id = $1 AND queue = $2;

-- name: queue_retention_list
SELECT queue, succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = $1;

-- name: queue_retention_get
SELECT succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = $1 AND queue = $2;

-- The sweep: up to $5 finished tasks past their queue's (else the default) period, oldest
-- finish first, with their attempts and outgoing dependency rows. The index range is bounded by
-- the shortest period anywhere, so a sweep with nothing due reads nothing. A task that is still a
-- schedule's last occurrence stays (the materializer's overlap rule reads its status). Returns
-- each task as a JSON document, for the archive (written before the transaction commits).
-- name: task_retention_sweep
WITH params AS (
    SELECT coalesce($1::timestamptz, now()) AS now,
           least($2::float8, $3::float8, $4::float8,
                 (SELECT least(min(succeeded_seconds), min(failed_seconds),
                               min(cancelled_seconds)) FROM queue_retention)) AS shortest
), doomed AS (
    SELECT t.id
    FROM tasks t
    CROSS JOIN params p
    LEFT JOIN queue_retention r ON r.tenant_id = t.tenant_id AND r.queue = t.queue
    WHERE t.status IN ('succeeded', 'failed', 'cancelled')
      AND t.finished_at < p.now - make_interval(secs => p.shortest)
      AND t.finished_at < p.now - make_interval(secs => CASE t.status
              WHEN 'succeeded' THEN coalesce(r.succeeded_seconds, $2::float8)
              WHEN 'failed' THEN coalesce(r.failed_seconds, $3::float8)
              ELSE coalesce(r.cancelled_seconds, $4::float8) END)
      AND t.id NOT IN (SELECT last_task_id FROM schedules WHERE last_task_id IS NOT NULL)
    ORDER BY t.finished_at
    LIMIT $5
    FOR UPDATE OF t SKIP LOCKED
), gone_deps AS (
    DELETE FROM task_deps d USING doomed WHERE d.parent_id = doomed.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed WHERE a.task_id = doomed.id
)
DELETE FROM tasks t USING doomed WHERE t.id = doomed.id
RETURNING t.id::text AS id, t.tenant_id, t.name, t.queue, t.status, t.schedule_id, t.finished_at,
          to_jsonb(t)::text AS document;

-- One page of a tenant's history, newest first. Run with plan_cache_mode = force_custom_plan:
-- the filters that are NULL fold away, the index that fits is picked, partitions are pruned by
-- the time range.
-- name: history_query
SELECT at, id, kind, task_id, schedule_id, name, queue, labels, from_status, to_status, actor,
       fields, attempt, started_at, outcome, error, http_status, duration_ms, worker
FROM history
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR task_id = $2)
  AND ($3::text IS NULL OR schedule_id = $3)
  AND ($4::text IS NULL OR name = $4)
  AND ($5::text IS NULL OR queue = $5)
  AND ($6::text[] IS NULL OR kind = ANY ($6))
  AND ($7::text[] IS NULL OR outcome = ANY ($7))
  AND ($8::jsonb IS NULL OR labels @> $8)
  AND ($9::timestamptz IS NULL OR at >= $9)
  AND ($10::timestamptz IS NULL OR at < $10)
  AND ($11::timestamptz IS NULL OR (at, id) < ($11, $12::bigint))
ORDER BY at DESC, id DESC
LIMIT $13;

-- name: history_plan_custom
SET LOCAL plan_cache_mode = force_custom_plan;

-- The attempts of a task that left the hot store, from its history records.
-- name: history_attempts
SELECT task_id, attempt AS number, started_at, at AS finished_at, outcome, error, http_status, duration_ms, worker
FROM history
WHERE task_id = $1 AND tenant_id = $2 AND kind = 'attempt'
ORDER BY attempt;

-- name: history_task_known
SELECT EXISTS (SELECT 1 FROM history WHERE task_id = $1 AND tenant_id = $2);

-- name: history_partition_ensure
SELECT history_partition_ensure($1::date);

-- name: history_partition_drop
SELECT history_partition_drop($1::date);

-- Months that hold hot records: the monthly partitions, and months stranded in the default one.
-- name: history_months
SELECT to_date(substr(c.relname, 10), 'YYYYMM') AS month
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'history'::regclass AND c.relname ~ '^history_p[0-9]{6}$'
UNION
SELECT DISTINCT date_trunc('month', at AT TIME ZONE 'UTC')::date FROM history_default
ORDER BY 1;

-- name: history_default_months
SELECT DISTINCT date_trunc('month', at AT TIME ZONE 'UTC')::date AS month FROM history_default;

-- name: history_month_counts
SELECT tenant_id, count(*) AS n FROM history WHERE at >= $1 AND at < $2 GROUP BY tenant_id;

-- A month for the archive: grouped by tenant, then by name, each name's records by time (the
-- order of the Parquet files, so a name's records share row groups). The direction lets the
-- (tenant_id, name, at DESC, id DESC) index be read backwards instead of sorting the month.
-- name: history_month_rows
SELECT at, id, tenant_id, kind, task_id::text AS task_id, schedule_id, name, queue,
       labels::text AS labels, from_status, to_status, actor, fields::text AS fields, attempt,
       started_at, outcome, error, http_status, duration_ms, worker
FROM history WHERE at >= $1 AND at < $2
ORDER BY tenant_id DESC, name DESC NULLS FIRST, at, id;
