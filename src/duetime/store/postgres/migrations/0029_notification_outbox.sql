-- Durable notifications (duetime/store/core/outbox.py, duetime/engine/notifier.py): each harm
-- event is a row written in the transaction of the change that causes it (a completion that
-- dead-letters, a circuit recorded open, ...); the notifier turns a (tenant, type)'s rows into
-- one notification task and deletes them in one transaction, so an event is sent at least once
-- and a node dying loses none. notification_sends holds when each (tenant, type) last sent, for
-- the digest window, on every node alike.
CREATE TABLE notification_events (
    id          uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type        text NOT NULL,
    item        jsonb NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX notification_events_key_idx ON notification_events (tenant_id, type, at, id);

CREATE TABLE notification_sends (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type        text NOT NULL,
    sent_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, type)
);
