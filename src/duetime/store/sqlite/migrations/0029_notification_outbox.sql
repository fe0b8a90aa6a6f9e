-- Durable notifications (duetime/store/core/outbox.py, duetime/engine/notifier.py); as in
-- PostgreSQL's.
CREATE TABLE notification_events (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type        TEXT    NOT NULL,
    item        TEXT    NOT NULL,
    at          INTEGER NOT NULL
) STRICT;
CREATE INDEX notification_events_key ON notification_events (tenant_id, type, at, id);

CREATE TABLE notification_sends (
    tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type        TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, type)
) STRICT, WITHOUT ROWID;
