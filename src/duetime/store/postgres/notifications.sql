-- Tenant notification settings, one row per tenant (plans in duetime/store/core/notifications.py).

-- name: notification_put
INSERT INTO tenant_notifications (tenant_id, events, target, updated_at)
VALUES (:tenant_id, :events::jsonb, :target::jsonb, coalesce(:now::timestamptz, now()))
ON CONFLICT (tenant_id) DO UPDATE
    SET events = EXCLUDED.events, target = EXCLUDED.target, updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: notification_get
SELECT * FROM tenant_notifications WHERE tenant_id = :tenant_id;

-- name: notification_delete
DELETE FROM tenant_notifications WHERE tenant_id = :tenant_id;
