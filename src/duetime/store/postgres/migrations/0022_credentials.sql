-- Named credentials (docs/security.md "Named credentials"; duetime/delivery/credentials.py): one
-- row per (tenant, name), the secret sealed with the node's key ring (never stored in plain), so
-- a target names the credential ({"auth": {"credential": "<name>"}}) and carries no secret.
CREATE TABLE credentials (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('header', 'basic')),
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
