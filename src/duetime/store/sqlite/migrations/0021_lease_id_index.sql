-- PostgreSQL's migration of this version rebuilds tasks_lease_id_idx on lease_id IS NOT NULL;
-- SQLite's planner has no such choice to make. The version exists so both backends ship the same
-- ones.
SELECT 1;
