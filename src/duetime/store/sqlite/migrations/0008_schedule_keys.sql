-- Declarative schedules (SPEC §3 `PUT /v1/schedules/by-key/{key}`): a schedule may carry a
-- tenant-unique key; the partial unique index is what makes N processes declaring the same
-- schedule at once end with exactly one (a deleted schedule frees its key).
ALTER TABLE schedules ADD COLUMN key TEXT;

CREATE UNIQUE INDEX schedules_tenant_key_idx ON schedules (tenant_id, key)
    WHERE key IS NOT NULL AND deleted = 0;
