-- Tenant quotas (SPEC §7): NULL is "no limit". create_tokens/create_tokens_at are the token
-- bucket of max_creates_per_second (NULL until the first create under a rate quota).
ALTER TABLE tenants
    ADD COLUMN max_pending_tasks bigint CHECK (max_pending_tasks >= 0),
    ADD COLUMN max_creates_per_second double precision CHECK (max_creates_per_second > 0),
    ADD COLUMN max_concurrency integer CHECK (max_concurrency >= 0),
    ADD COLUMN max_schedules integer CHECK (max_schedules >= 0),
    ADD COLUMN weight integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    ADD COLUMN create_tokens double precision,
    ADD COLUMN create_tokens_at timestamptz;
