-- History, retention and audit (see migrations/0007_history.sql and docs/history.md).

-- The actor of the write transaction under way (see migrations/0007_history.sql).
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

-- Finished tasks past their queue's (else the default) period, oldest finish first; the range
-- is bounded by the shortest period anywhere. Attempts and dependency rows go with them
-- (ON DELETE CASCADE). A schedule's last occurrence stays.
-- name: task_retention_doomed
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
  AND t.id NOT IN (SELECT last_task_id FROM schedules WHERE last_task_id IS NOT NULL)
ORDER BY t.finished_at
LIMIT :limit;

-- name: task_retention_rows
SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: task_retention_delete
DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

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

-- name: history_attempts
SELECT task_id, attempt AS number, started_at, at AS finished_at, outcome, error, http_status,
       duration_ms, worker
FROM history
WHERE task_id = :task_id AND tenant_id = :tenant_id AND kind = 'attempt'
ORDER BY attempt;

-- name: history_task_known
SELECT EXISTS (SELECT 1 FROM history WHERE task_id = :task_id AND tenant_id = :tenant_id);

-- name: history_first_at
SELECT min(at) FROM history WHERE at >= :after;

-- name: history_month_counts
SELECT tenant_id, count(*) AS n FROM history WHERE at >= :lo AND at < :hi GROUP BY tenant_id;

-- A month for the archive, a page at a time: grouped by tenant, then by name, each name's records
-- by time (the order of the Parquet files).
-- name: history_month_rows
SELECT * FROM history
WHERE at >= :lo AND at < :hi
  AND (tenant_id, coalesce(name, ''), at, id) > (:tenant_id, :name, :at, :id)
ORDER BY tenant_id, coalesce(name, ''), at, id
LIMIT :limit;

-- name: history_month_delete
DELETE FROM history WHERE id IN (
    SELECT id FROM history WHERE at >= :lo AND at < :hi LIMIT :limit);
