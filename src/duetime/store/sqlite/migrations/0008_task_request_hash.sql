-- Idempotency conflicts (SPEC §3): a task created with an idempotency key keeps a fingerprint
-- of the create request that made it, so a later create with the same key and different fields
-- is told apart (409) from a true repeat (200). NULL for tasks made before this migration and
-- for tasks without a key: those repeats are accepted as before.
ALTER TABLE tasks ADD COLUMN request_hash TEXT;
