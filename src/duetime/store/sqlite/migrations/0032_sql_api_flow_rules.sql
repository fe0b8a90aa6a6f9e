-- The SQL API's key expressions and uniqueness windows are PostgreSQL's alone (as
-- 0024_sql_api.sql): SQLite keeps the HTTP path. This version exists so both backends ship the
-- same ones.
SELECT 1;
