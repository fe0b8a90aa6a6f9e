-- History, retention and audit (plans in duetime/store/core/history.py; the triggers in
-- migrations/0007_history.sql; docs/history.md).

-- The audit actor of the current transaction (transaction-local: it ends with it).
-- name: actor_set
SELECT set_config('duetime.actor', :actor, true);

-- name: actor_clear
SELECT set_config('duetime.actor', '', true);

-- name: queue_retention_put
INSERT INTO queue_retention (tenant_id, queue, succeeded_seconds, failed_seconds,
                             cancelled_seconds)
VALUES (:tenant_id, :queue, :succeeded, :failed, :cancelled)
ON CONFLICT (tenant_id, queue) DO UPDATE
SET succeeded_seconds = EXCLUDED.succeeded_seconds,
    failed_seconds = EXCLUDED.failed_seconds,
    cancelled_seconds = EXCLUDED.cancelled_seconds;

-- name: queue_retention_delete
DELETE FROM queue_retention WHERE tenant_id = :tenant_id AND queue = :queue;

-- name: queue_retention_list
SELECT queue, succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = :tenant_id;

-- name: queue_retention_get
SELECT succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = :tenant_id AND queue = :queue;

-- The sweep: up to :limit finished tasks past their queue's (else the default) period, oldest
-- finish first, with their attempts and outgoing dependency rows. The index range is bounded by
-- the shortest period anywhere, so a sweep with nothing due reads nothing. A task that is still a
-- schedule's last occurrence stays (the materializer's overlap rule reads its status). Returns
-- each task as a JSON document, for the archive (written before the transaction commits).
-- name: task_retention_sweep
WITH params AS (
    SELECT coalesce(:now::timestamptz, now()) AS now,
           least(:succeeded::float8, :failed::float8, :cancelled::float8,
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
              WHEN 'succeeded' THEN coalesce(r.succeeded_seconds, :succeeded::float8)
              WHEN 'failed' THEN coalesce(r.failed_seconds, :failed::float8)
              ELSE coalesce(r.cancelled_seconds, :cancelled::float8) END)
      -- Asked of the task's own schedule (last_task_id only ever names a task of that
      -- schedule), by primary key: "t.id NOT IN (SELECT last_task_id FROM schedules)" read
      -- every schedule for each sweep (a sweep of 500 took 38 ms with 100,000 schedules, 13 ms
      -- without that read).
      AND NOT EXISTS (SELECT 1 FROM schedules s
                      WHERE s.id = t.schedule_id AND s.last_task_id = t.id)
    ORDER BY t.finished_at
    LIMIT :limit
    FOR UPDATE OF t SKIP LOCKED
), gone_deps AS (
    DELETE FROM task_deps d USING doomed WHERE d.parent_id = doomed.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed WHERE a.task_id = doomed.id
), gone_follow AS (
    DELETE FROM task_follow f USING doomed WHERE f.task_id = doomed.id
)
DELETE FROM tasks t USING doomed WHERE t.id = doomed.id
RETURNING t.id::text AS id, t.tenant_id, t.name, t.queue, t.status, t.schedule_id, t.finished_at,
          to_jsonb(t)::text AS document;

-- Hot history: the indexed table and the records still waiting in history_pending (migration
-- 0019, docs/adr/0008-history-written-behind.md), read in one snapshot, in which every record is
-- in exactly one of the two. The filters of a read reach both branches; the pending branch is
-- a scan of the few seconds of records the leader has not moved yet.
-- fragment: pending_records
history_pending p CROSS JOIN LATERAL unnest(p.rows) AS h

-- fragment: history_rows
(SELECT * FROM history
 UNION ALL
 SELECT h.* FROM
 -- include: pending_records
) AS history

-- One page of a tenant's history, newest first. Run after plan_custom: the filters that
-- are NULL fold away, the index that fits is picked, partitions are pruned by the time range.
-- name: history_query
SELECT at, id, kind, task_id, schedule_id, name, queue, labels, from_status, to_status, actor,
       fields, attempt, started_at, outcome, error, http_status, duration_ms, worker, logs,
       response
FROM
-- include: history_rows
WHERE tenant_id = :tenant_id
  AND (:task_id::uuid IS NULL OR task_id = :task_id)
  AND (:schedule_id::text IS NULL OR schedule_id = :schedule_id)
  AND (:name::text IS NULL OR name = :name)
  AND (:queue::text IS NULL OR queue = :queue)
  AND (:kinds::text[] IS NULL OR kind = ANY (:kinds))
  AND (:outcomes::text[] IS NULL OR outcome = ANY (:outcomes))
  AND (:labels::jsonb IS NULL OR labels @> :labels)
  AND (:since::timestamptz IS NULL OR at >= :since)
  AND (:until::timestamptz IS NULL OR at < :until)
  AND (:cursor_at::timestamptz IS NULL OR (at, id) < (:cursor_at, :cursor_id::bigint))
ORDER BY at DESC, id DESC
LIMIT :limit;

-- The list statements' plans (history_query, task_list): custom for each run, so the filters
-- left NULL fold away. In the plan's transaction only.
-- name: plan_custom
SET LOCAL plan_cache_mode = force_custom_plan;

-- The attempts of a task that left the hot store, from its history records.
-- name: history_attempts
SELECT task_id, attempt AS number, started_at, at AS finished_at, outcome, error, http_status,
       duration_ms, worker, logs, response
FROM
-- include: history_rows
WHERE task_id = :task_id AND tenant_id = :tenant_id AND kind = 'attempt'
ORDER BY attempt;

-- name: history_task_known
SELECT EXISTS (SELECT 1 FROM
-- include: history_rows
WHERE task_id = :task_id AND tenant_id = :tenant_id);

-- The months whose partitions to make: those asked for, every month stranded in the default
-- partition (its rows move in when the partition is made), and those of pending records.
-- name: history_partition_months
SELECT to_char(m, 'YYYY-MM-DD') AS month
FROM (SELECT unnest(:months::date[]) AS m
      UNION
      SELECT date_trunc('month', at AT TIME ZONE 'UTC')::date FROM history_default
      UNION
      SELECT date_trunc('month', h.at AT TIME ZONE 'UTC')::date FROM
      -- include: pending_records
      ) AS months
ORDER BY 1;

-- name: history_partition_ensure
SELECT history_partition_ensure(:month::date);

-- Months that hold hot records: the monthly partitions, months stranded in the default one, and
-- those of pending records.
-- name: history_months
SELECT to_char(month, 'YYYY-MM-DD') AS month
FROM (SELECT to_date(substr(c.relname, 10), 'YYYYMM') AS month
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'history'::regclass AND c.relname ~ '^history_p[0-9]{6}$'
      UNION
      SELECT DISTINCT date_trunc('month', at AT TIME ZONE 'UTC')::date FROM history_default
      UNION
      SELECT date_trunc('month', h.at AT TIME ZONE 'UTC')::date FROM
      -- include: pending_records
      ) AS months
ORDER BY 1;

-- A month's records by tenant, pending ones included: the archive round moves them first, so
-- one left behind shows as a mismatch with the export (read from the partitions) and the month
-- stays in the store.
-- name: history_month_counts
SELECT tenant_id, count(*) AS n FROM
-- include: history_rows
WHERE at >= :lo AND at < :hi GROUP BY tenant_id;

-- Statements whose audit records wait in history_pending (duetime doctor; no index, so a
-- count reads the small table).
-- name: history_pending_rows
SELECT count(*) FROM history_pending;

-- The leader's history mover: up to :limit pending rows (each one statement's records) into
-- history, in one transaction; returns how many records moved. SKIP LOCKED: a second mover (a
-- leader change under way) takes other rows, never the same ones twice.
-- name: history_pending_move
WITH moved AS (
    DELETE FROM history_pending
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM history_pending LIMIT :limit FOR UPDATE SKIP LOCKED))
    RETURNING rows
), inserted AS (
    INSERT INTO history SELECT h.* FROM moved CROSS JOIN LATERAL unnest(moved.rows) AS h
    RETURNING 1
)
SELECT count(*) FROM inserted;

-- Detach and drop the month's partition (never a mass DELETE); counts 1 row when it did, 0 when
-- the month has none.
-- name: history_month_drop
SELECT 1 WHERE history_partition_drop((:month::timestamptz AT TIME ZONE 'UTC')::date);
