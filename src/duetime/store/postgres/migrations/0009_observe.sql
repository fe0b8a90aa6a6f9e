-- Observability (SPEC §9): the W3C traceparent a task was created with (NULL: none; see
-- duetime/observe/tracing.py), and each tenant's notification settings (one row per tenant:
-- the harm events it wants and the http target they are sent to; see duetime/notify/).
ALTER TABLE tasks ADD COLUMN traceparent text;
ALTER TYPE task_input ADD ATTRIBUTE traceparent text;

CREATE TABLE tenant_notifications (
    tenant_id   text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    events      jsonb NOT NULL,
    target      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL
);
