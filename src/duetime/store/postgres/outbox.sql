-- Durable notifications (plans in duetime/store/core/outbox.py; migration 0029). An event is
-- written only for a tenant whose notification settings ask for its type. Conventions as in
-- queries.sql.

-- name: notification_dead_letters_record
-- Tasks :ids just dead-lettered (ended failed by an attempt), in the transaction of that end;
-- notifications' own dead letters never notify (a broken target cannot feed itself).
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT gen_random_uuid(), t.tenant_id, 'task.dead_lettered',
       jsonb_build_object('task_id', t.id, 'queue', t.queue, 'name', t.name,
                          'attempt', t.attempts, 'error', left(t.last_error, 500)),
       coalesce(:now::timestamptz, now())
FROM tasks t JOIN tenant_notifications n ON n.tenant_id = t.tenant_id
WHERE t.id = ANY(:ids::uuid[]) AND t.status = 'failed' AND t.queue <> :queue
  AND n.events ? 'task.dead_lettered';

-- name: notification_event_record
-- One event of :type for :tenant_id (a circuit recorded open, a quota refused ...).
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT gen_random_uuid(), n.tenant_id, :type, :item::jsonb, coalesce(:now::timestamptz, now())
FROM tenant_notifications n
WHERE n.tenant_id = :tenant_id AND n.events ? :type;

-- name: notification_ticks_missed_record
-- (batch) Schedules that missed ticks in the transaction that recorded them.
INSERT INTO notification_events (id, tenant_id, type, item, at)
SELECT gen_random_uuid(), s.tenant_id, 'schedule.tick_missed',
       jsonb_build_object('schedule_id', s.id, 'missed', m.missed),
       coalesce(:now::timestamptz, now())
FROM unnest(:schedule_id::text[], :missed::integer[]) AS m (schedule_id, missed)
JOIN schedules s ON s.id = m.schedule_id
JOIN tenant_notifications n ON n.tenant_id = s.tenant_id
WHERE n.events ? 'schedule.tick_missed';

-- name: notification_due_keys
-- The (tenant, type)s with events whose last notification is at least :window seconds old.
SELECT DISTINCT e.tenant_id, e.type
FROM notification_events e
LEFT JOIN notification_sends s ON s.tenant_id = e.tenant_id AND s.type = e.type
WHERE s.sent_at IS NULL
   OR s.sent_at <= coalesce(:now::timestamptz, now()) - make_interval(secs => :window::float8)
LIMIT :limit;

-- name: notification_events_take
SELECT id, item, at FROM notification_events
WHERE tenant_id = :tenant_id AND type = :type
ORDER BY at, id
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: notification_events_delete
DELETE FROM notification_events WHERE id = ANY(:ids::uuid[]);

-- name: notification_send_put
INSERT INTO notification_sends (tenant_id, type, sent_at)
VALUES (:tenant_id, :type, coalesce(:now::timestamptz, now()))
ON CONFLICT (tenant_id, type) DO UPDATE SET sent_at = EXCLUDED.sent_at;

-- name: notification_events_count
SELECT count(*) FROM notification_events;
