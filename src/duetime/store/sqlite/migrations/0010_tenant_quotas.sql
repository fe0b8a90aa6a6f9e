-- Tenant quotas (SPEC §7): NULL is "no limit". create_tokens/create_tokens_at are the token
-- bucket of max_creates_per_second (NULL until the first create under a rate quota).
ALTER TABLE tenants ADD COLUMN max_pending_tasks INTEGER CHECK (max_pending_tasks >= 0);
ALTER TABLE tenants ADD COLUMN max_creates_per_second REAL CHECK (max_creates_per_second > 0);
ALTER TABLE tenants ADD COLUMN max_concurrency INTEGER CHECK (max_concurrency >= 0);
ALTER TABLE tenants ADD COLUMN max_schedules INTEGER CHECK (max_schedules >= 0);
ALTER TABLE tenants ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000);
ALTER TABLE tenants ADD COLUMN create_tokens REAL;
ALTER TABLE tenants ADD COLUMN create_tokens_at INTEGER;
