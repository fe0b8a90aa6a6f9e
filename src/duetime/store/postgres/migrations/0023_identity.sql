-- Outbound identity, payloads held by reference and dashboard sessions (docs/security.md).

-- The keys that sign OIDC ID tokens (duetime/delivery/identity.py). A key is published (in
-- /.well-known/jwks.json) from its creation and signs from signs_from; one key per generation,
-- so two nodes rotating at once make one new key, not two.
CREATE TABLE signing_keys (
    kid          text PRIMARY KEY,
    generation   bigint NOT NULL UNIQUE,
    algorithm    text NOT NULL,
    public_jwk   text NOT NULL,
    private_key  text NOT NULL,   -- PEM, sealed with the node's secret key
    created_at   timestamptz NOT NULL,
    signs_from   timestamptz NOT NULL
);

-- TLS client certificates a tenant's webhooks present (target "auth": {"mtls": "<name>"}).
CREATE TABLE client_certificates (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL,
    certificate  text NOT NULL,   -- PEM chain, the leaf first
    private_key  text NOT NULL,   -- PEM, sealed
    fingerprint  text NOT NULL,   -- SHA-256 of the leaf, hex
    subject      text NOT NULL,
    not_after    timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- Payloads duetime holds for a task ("payload_held"); task_id is set once the task exists.
CREATE TABLE held_payloads (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL,
    task_id     uuid,
    payload     text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX held_payloads_task_idx ON held_payloads (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX held_payloads_unlinked_idx ON held_payloads (created_at) WHERE task_id IS NULL;

-- Dashboard sessions: the cookie holds a random id, the store only its SHA-256.
CREATE TABLE ui_sessions (
    token_hash  text PRIMARY KEY,
    tenant_id   text REFERENCES tenants (id) ON DELETE CASCADE,   -- NULL: the admin
    key_id      text,                                             -- the key logged in with
    created_at  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX ui_sessions_tenant_idx ON ui_sessions (tenant_id);
CREATE INDEX ui_sessions_expiry_idx ON ui_sessions (expires_at);
