-- Named credentials (docs/security.md "Named credentials"; duetime/delivery/credentials.py): one
-- row per (tenant, name), the secret sealed with the node's key ring (never stored in plain), so
-- a target names the credential ({"auth": {"credential": "<name>"}}) and carries no secret.
CREATE TABLE credentials (
    tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    kind        TEXT    NOT NULL CHECK (kind IN ('header', 'basic')),
    secret      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT, WITHOUT ROWID;
