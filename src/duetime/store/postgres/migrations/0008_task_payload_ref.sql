-- payload_ref (SPEC §3): an opaque reference (≤ 2 KiB) a task may carry instead of a payload,
-- handed to the webhook (`duetime-payload-ref` header) or the worker as-is, so secrets never
-- enter duetime. NULL for every task that has none (all tasks made before this migration).
ALTER TABLE tasks ADD COLUMN payload_ref text;
ALTER TYPE task_input ADD ATTRIBUTE payload_ref text;
