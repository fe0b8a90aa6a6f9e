-- Observability (SPEC §9): the W3C traceparent a task was created with (NULL: none; see
-- duetime/observe/tracing.py), and each tenant's notification settings (one row per tenant:
-- the harm events it wants and the http target they are sent to; see duetime/notify/).
ALTER TABLE tasks ADD COLUMN traceparent TEXT;

CREATE TABLE tenant_notifications (
    tenant_id   TEXT    NOT NULL PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    events      TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
