-- History, retention and audit (plans in duetime/store/core/history.py; the triggers in
-- migrations/0007_history.sql; docs/history.md). SQLite has no partitions: the history table is
-- one table, and a month is a time range.

-- The actor of the write transaction under way: the one row of audit_actor, deleted again before
-- the transaction commits (SQLite has one writer, so no other transaction ever sees it).
-- name: actor_set
INSERT OR REPLACE INTO audit_actor (id, actor) VALUES (1, :actor);

-- name: actor_clear
DELETE FROM audit_actor;

-- name: queue_retention_put
INSERT INTO queue_retention (tenant_id, queue, succeeded_seconds, failed_seconds,
                             cancelled_seconds)
VALUES (:tenant_id, :queue, :succeeded, :failed, :cancelled)
ON CONFLICT (tenant_id, queue) DO UPDATE
SET succeeded_seconds = excluded.succeeded_seconds,
    failed_seconds = excluded.failed_seconds,
    cancelled_seconds = excluded.cancelled_seconds;

-- name: queue_retention_delete
DELETE FROM queue_retention WHERE tenant_id = :tenant_id AND queue = :queue;

-- name: queue_retention_list
SELECT queue, succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = :tenant_id;

-- name: queue_retention_get
SELECT succeeded_seconds, failed_seconds, cancelled_seconds
FROM queue_retention WHERE tenant_id = :tenant_id AND queue = :queue;

-- The sweep: up to :limit finished tasks past their queue's (else the default) period, oldest
-- finish first; the range is bounded by the shortest period anywhere. Attempts and dependency rows
-- go with them (ON DELETE CASCADE). A schedule's last occurrence stays. Returns the whole rows
-- (the archive's document is made of them; `document` is PostgreSQL's to_jsonb).
-- name: task_retention_sweep
DELETE FROM tasks WHERE id IN (
    SELECT t.id
    FROM tasks t
    LEFT JOIN queue_retention r ON r.tenant_id = t.tenant_id AND r.queue = t.queue
    WHERE t.status IN ('succeeded', 'failed', 'cancelled')
      AND t.finished_at < :now - CAST(1000000 * min(:succeeded, :failed, :cancelled,
            coalesce((SELECT min(min(coalesce(succeeded_seconds, 1e18)),
                                 min(coalesce(failed_seconds, 1e18)),
                                 min(coalesce(cancelled_seconds, 1e18)))
                      FROM queue_retention), 1e18)) AS INTEGER)
      AND t.finished_at < :now - CAST(1000000 * CASE t.status
              WHEN 'succeeded' THEN coalesce(r.succeeded_seconds, :succeeded)
              WHEN 'failed' THEN coalesce(r.failed_seconds, :failed)
              ELSE coalesce(r.cancelled_seconds, :cancelled) END AS INTEGER)
      -- Asked of the task's own schedule by primary key, as PostgreSQL's (last_task_id only
      -- ever names a task of that schedule), not by reading every schedule for each sweep.
      AND NOT EXISTS (SELECT 1 FROM schedules AS s
                      WHERE s.id = t.schedule_id AND s.last_task_id = t.id)
    ORDER BY t.finished_at
    LIMIT :limit)
RETURNING *, NULL AS document;

-- name: history_query
SELECT * FROM history
WHERE tenant_id = :tenant_id
  AND (:task_id IS NULL OR task_id = :task_id)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:name IS NULL OR name = :name)
  AND (:queue IS NULL OR queue = :queue)
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
  AND (:outcomes IS NULL OR outcome IN (SELECT value FROM json_each(:outcomes)))
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(history.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
  AND (:since IS NULL OR at >= :since)
  AND (:until IS NULL OR at < :until)
  AND (:cursor_at IS NULL OR at < :cursor_at OR (at = :cursor_at AND id < :cursor_id))
ORDER BY at DESC, id DESC
LIMIT :limit;

-- PostgreSQL's plans for history_query and task_list; SQLite plans each run anyway.
-- name: plan_custom
SELECT 1;

-- name: history_attempts
SELECT task_id, attempt AS number, started_at, at AS finished_at, outcome, error, http_status,
       duration_ms, worker, logs, response
FROM history
WHERE task_id = :task_id AND tenant_id = :tenant_id AND kind = 'attempt'
ORDER BY attempt;

-- name: history_task_known
SELECT EXISTS (SELECT 1 FROM history WHERE task_id = :task_id AND tenant_id = :tenant_id);

-- No partitions, so none to make (history_partition_ensure is never reached).
-- name: history_partition_months
SELECT value AS month FROM json_each(:months) WHERE 0;

-- name: history_partition_ensure
SELECT :month IS NULL;

-- The months that hold records: one index probe per month (a skip scan of history_at).
-- name: history_months
WITH RECURSIVE m (at) AS (
    SELECT min(at) FROM history
    UNION ALL
    SELECT (SELECT min(at) FROM history
            WHERE at >= CAST(strftime('%s', m.at / 1000000, 'unixepoch', 'start of month',
                                      '+1 month') AS INTEGER) * 1000000)
    FROM m WHERE m.at IS NOT NULL
)
SELECT strftime('%Y-%m-01', at / 1000000, 'unixepoch') AS month FROM m WHERE at IS NOT NULL;

-- name: history_month_counts
SELECT tenant_id, count(*) AS n FROM history WHERE at >= :lo AND at < :hi GROUP BY tenant_id;

-- PostgreSQL's history mover (its history is written behind, migration 0019); SQLite writes
-- history directly: nothing is ever pending.
-- name: history_pending_move
SELECT 0 * :limit;

-- name: history_pending_rows
SELECT 0;

-- Up to 10,000 of the month's records per write transaction, so the hot path waits for one batch
-- at most; the caller repeats until none is left.
-- name: history_month_drop
DELETE FROM history WHERE id IN (
    SELECT id FROM history
    WHERE at >= :month
      AND at < CAST(strftime('%s', :month / 1000000, 'unixepoch', '+1 month') AS INTEGER) * 1000000
    LIMIT 10000);
