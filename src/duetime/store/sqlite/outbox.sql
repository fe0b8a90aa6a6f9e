-- Durable notifications (plans in duetime/store/core/outbox.py); as in PostgreSQL's.

-- name: notification_dead_letters_record
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT duetime_uuid(), t.tenant_id, 'task.dead_lettered',
       json_object('task_id', t.id, 'queue', t.queue, 'name', t.name,
                   'attempt', t.attempts, 'error', substr(t.last_error, 1, 500)),
       :now
FROM tasks AS t JOIN tenant_notifications AS n ON n.tenant_id = t.tenant_id
WHERE t.id IN (SELECT value FROM json_each(:ids)) AND t.status = 'failed' AND t.queue <> :queue
  AND EXISTS (SELECT 1 FROM json_each(n.events) WHERE value = 'task.dead_lettered');

-- name: notification_event_record
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT duetime_uuid(), n.tenant_id, :type, :item, :now
FROM tenant_notifications AS n
WHERE n.tenant_id = :tenant_id AND EXISTS (SELECT 1 FROM json_each(n.events) WHERE value = :type);

-- name: notification_ticks_missed_record
-- (batch)
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT duetime_uuid(), s.tenant_id, 'schedule.tick_missed',
       json_object('schedule_id', s.id, 'missed', :missed), :now
FROM schedules AS s JOIN tenant_notifications AS n ON n.tenant_id = s.tenant_id
WHERE s.id = :schedule_id
  AND EXISTS (SELECT 1 FROM json_each(n.events) WHERE value = 'schedule.tick_missed');

-- name: notification_due_keys
SELECT DISTINCT e.tenant_id, e.type
FROM notification_events AS e
LEFT JOIN notification_sends AS s ON s.tenant_id = e.tenant_id AND s.type = e.type
WHERE s.sent_at IS NULL OR s.sent_at <= :now - CAST(:window * 1000000 AS INTEGER)
LIMIT :limit;

-- name: notification_events_take
-- One writer: nothing to lock.
SELECT id, item, at FROM notification_events
WHERE tenant_id = :tenant_id AND type = :type
ORDER BY at, id
LIMIT :limit;

-- name: notification_events_delete
DELETE FROM notification_events WHERE id IN (SELECT value FROM json_each(:ids));

-- name: notification_send_put
INSERT INTO notification_sends (tenant_id, type, sent_at) VALUES (:tenant_id, :type, :now)
ON CONFLICT (tenant_id, type) DO UPDATE SET sent_at = excluded.sent_at;

-- name: notification_events_count
SELECT count(*) FROM notification_events;
