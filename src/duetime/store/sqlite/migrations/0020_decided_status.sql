-- PostgreSQL's migration of this version adds the decided status to its task_completion type;
-- SQLite's completions travel as JSON and need no schema change. The version exists so both
-- backends ship the same ones.
SELECT 1;
