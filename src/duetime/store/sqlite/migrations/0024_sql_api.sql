-- The SQL API (functions an application calls inside its own transaction) is PostgreSQL's
-- alone: SQLite keeps the HTTP path. This version exists so both backends ship the same ones.
SELECT 1;
