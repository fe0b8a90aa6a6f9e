-- PostgreSQL's migration of this version writes the audit trail behind (history_pending, moved
-- into history by the leader; docs/adr/0008-history-written-behind.md). SQLite's history triggers
-- stay as they are: its single writer commits every write transaction to disk, and the history
-- rows are a small part of that. Nothing changes; the version exists so both backends ship the
-- same ones.
SELECT 1;
