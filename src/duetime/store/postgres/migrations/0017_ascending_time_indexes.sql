-- The indexes whose newest entries come last are built ascending. history_tenant_idx and
-- history_name_idx were (..., at DESC, id DESC), tasks_tenant_status_idx (tenant_id, status,
-- id DESC): every new entry then went to the far left of its range, where a B-tree splits a full
-- page in half and leaves the left half to fill with newer entries only — so the old halves
-- stayed half empty for good, and each insert walked down to that page again. Ascending, new
-- entries go to the right end, where PostgreSQL fills pages before splitting them (and, for the
-- index's rightmost page, skips the walk). Measured over 20,000 tasks' lives
-- (benchmarks/pg_cpu_phases.py): history_tenant_idx 10.9 -> 6.1 MB, history_name_idx
-- 12.1 -> 6.8 MB, tasks_tenant_status_idx 9.1 -> 6.4 MB. Every query reads them as before,
-- backwards for "newest first" (ORDER BY at DESC, id DESC; id DESC), which a B-tree serves as
-- well; the month export now reads history_name_idx forwards (history_export.sql).
--
-- name NULLS FIRST: the export's pages take each tenant's unnamed records before its named ones,
-- so that "the groups after this one" stays one index range (history_export.sql).
--
-- Rebuilding locks writes to history and tasks while it runs (docs/operations.md, upgrades).
DROP INDEX history_tenant_idx;
CREATE INDEX history_tenant_idx ON history (tenant_id, at, id);
DROP INDEX history_name_idx;
CREATE INDEX history_name_idx ON history (tenant_id, name NULLS FIRST, at, id);
DROP INDEX tasks_tenant_status_idx;
CREATE INDEX tasks_tenant_status_idx ON tasks (tenant_id, status, id);
