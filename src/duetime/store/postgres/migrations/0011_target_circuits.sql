-- Circuit breakers per (tenant, target origin) (SPEC §7 "Target protection";
-- duetime/delivery/circuit.py): the last state any process saw, for GET /v1/targets and for
-- other processes to adopt an open circuit.
CREATE TABLE target_circuits (
    tenant_id         text NOT NULL,
    origin            text NOT NULL,
    state             text NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    failures          integer NOT NULL,
    cooldown_seconds  double precision NOT NULL,
    open_until        timestamptz,
    opened            bigint NOT NULL DEFAULT 0,
    changed_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, origin)
);

-- Processes poll the circuits that hold deliveries now.
CREATE INDEX target_circuits_active_idx ON target_circuits (open_until) WHERE state <> 'closed';
