-- Outbound identity, payloads held by reference and dashboard sessions (docs/security.md).

-- The keys that sign OIDC ID tokens (duetime/delivery/identity.py). A key is published (in
-- /.well-known/jwks.json) from its creation and signs from signs_from; one key per generation,
-- so two nodes rotating at once make one new key, not two.
CREATE TABLE signing_keys (
    kid          TEXT    NOT NULL PRIMARY KEY,
    generation   INTEGER NOT NULL UNIQUE,
    algorithm    TEXT    NOT NULL,
    public_jwk   TEXT    NOT NULL,
    private_key  TEXT    NOT NULL,   -- PEM, sealed with the node's secret key
    created_at   INTEGER NOT NULL,
    signs_from   INTEGER NOT NULL
) STRICT;

-- TLS client certificates a tenant's webhooks present (target "auth": {"mtls": "<name>"}).
CREATE TABLE client_certificates (
    tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    certificate  TEXT    NOT NULL,   -- PEM chain, the leaf first
    private_key  TEXT    NOT NULL,   -- PEM, sealed
    fingerprint  TEXT    NOT NULL,   -- SHA-256 of the leaf, hex
    subject      TEXT    NOT NULL,
    not_after    INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT, WITHOUT ROWID;

-- Payloads duetime holds for a task ("payload_held"); task_id is set once the task exists.
CREATE TABLE held_payloads (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    task_id     TEXT,
    payload     TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX held_payloads_task ON held_payloads (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX held_payloads_unlinked ON held_payloads (created_at) WHERE task_id IS NULL;

-- Dashboard sessions: the cookie holds a random id, the store only its SHA-256.
CREATE TABLE ui_sessions (
    token_hash  TEXT    NOT NULL PRIMARY KEY,
    tenant_id   TEXT    REFERENCES tenants (id) ON DELETE CASCADE,   -- NULL: the admin
    key_id      TEXT,                                                -- the key logged in with
    created_at  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX ui_sessions_tenant ON ui_sessions (tenant_id);
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
