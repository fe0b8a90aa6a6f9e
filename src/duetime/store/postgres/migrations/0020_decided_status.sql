-- A completion carries the status its ending leads to, decided once above the store
-- (duetime.lifecycle.finish); task_complete_many applies it under the lease fence and overrides
-- it only for a task whose cancel was requested.
ALTER TYPE task_completion ADD ATTRIBUTE status text;
