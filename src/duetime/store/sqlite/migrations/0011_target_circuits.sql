-- Circuit breakers per (tenant, target origin) (SPEC §7 "Target protection";
-- duetime/delivery/circuit.py): the last state any process saw, for GET /v1/targets and for
-- other processes to adopt an open circuit.
CREATE TABLE target_circuits (
    tenant_id         TEXT    NOT NULL,
    origin            TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    failures          INTEGER NOT NULL,
    cooldown_seconds  REAL    NOT NULL,
    open_until        INTEGER,
    opened            INTEGER NOT NULL DEFAULT 0,
    changed_at        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, origin)
) STRICT, WITHOUT ROWID;

-- Processes poll the circuits that hold deliveries now.
CREATE INDEX target_circuits_active ON target_circuits (open_until) WHERE state <> 'closed';
