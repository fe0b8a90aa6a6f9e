-- duetime's own schema (plans in duetime/store/postgres/schema.py). The one place that names
-- "public": where a database migrated before the schema existed keeps duetime's objects.

-- Whether the database still has duetime's objects in public and none in :schema: duetime's
-- bookkeeping there beside two objects only duetime makes (so another tool's schema_migrations
-- is not taken for it). A catalog read alone: /readyz asks it on every probe.
-- name: schema_legacy
SELECT :schema::text <> 'public'
   AND to_regclass(format('%I.schema_migrations', :schema::text)) IS NULL
   AND to_regclass('public.schema_migrations') IS NOT NULL
   AND to_regclass('public.tasks') IS NOT NULL
   AND to_regtype('public.task_input') IS NOT NULL;

-- Makes the schema when missing (a schema made beforehand by an administrator is used as it is)
-- and, when :legacy, moves duetime's objects from public into it: tables, views and sequences
-- named in :names (a table takes its indexes, constraints, triggers, owned sequences and row
-- type), every partition of those, then standalone types and every function of those names.
-- Returns how many objects moved.
-- name: schema_functions
CREATE OR REPLACE FUNCTION pg_temp.duetime_schema_prepare(target text, names text[],
                                                        legacy boolean)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    moved integer := 0;
    item record;
BEGIN
    IF to_regnamespace(target) IS NULL THEN
        EXECUTE format('CREATE SCHEMA %I', target);
    END IF;
    IF NOT legacy THEN
        RETURN 0;
    END IF;
    FOR item IN
        WITH RECURSIVE named AS (
            SELECT c.oid FROM pg_class c
            WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY(names)
              AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            UNION
            SELECT i.inhrelid FROM pg_inherits i JOIN named n ON i.inhparent = n.oid
        )
        SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c JOIN named n ON n.oid = c.oid
        WHERE c.relnamespace = 'public'::regnamespace
    LOOP
        EXECUTE format('ALTER %s %s SET SCHEMA %I',
                       CASE item.relkind WHEN 'v' THEN 'VIEW'
                                         WHEN 'm' THEN 'MATERIALIZED VIEW'
                                         WHEN 'f' THEN 'FOREIGN TABLE'
                                         ELSE 'TABLE' END,
                       item.rel, target);
        moved := moved + 1;
    END LOOP;
    -- Sequences no table owns (owned ones moved with their table).
    FOR item IN
        SELECT c.oid::regclass AS rel FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY(names)
          AND c.relkind = 'S'
    LOOP
        EXECUTE format('ALTER SEQUENCE %s SET SCHEMA %I', item.rel, target);
        moved := moved + 1;
    END LOOP;
    -- Standalone types (composites, enums, domains); a table's row type moved with it.
    FOR item IN
        SELECT t.oid::regtype AS typ FROM pg_type t
        LEFT JOIN pg_class c ON c.oid = t.typrelid
        WHERE t.typnamespace = 'public'::regnamespace AND t.typname = ANY(names)
          AND (t.typrelid = 0 OR c.relkind = 'c')
    LOOP
        EXECUTE format('ALTER TYPE %s SET SCHEMA %I', item.typ, target);
        moved := moved + 1;
    END LOOP;
    FOR item IN
        SELECT p.oid::regprocedure AS fn FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.proname = ANY(names)
    LOOP
        EXECUTE format('ALTER ROUTINE %s SET SCHEMA %I', item.fn, target);
        moved := moved + 1;
    END LOOP;
    RETURN moved;
END $$;

-- name: schema_prepare
SELECT pg_temp.duetime_schema_prepare(:schema, :names::text[], :legacy);

-- name: schema_legacy_versions
SELECT version FROM public.schema_migrations ORDER BY version;

-- The helper above is the migrating session's only: dropped once used (pooled connections keep
-- no state of the store's).
-- name: schema_functions_drop
DROP FUNCTION IF EXISTS pg_temp.duetime_schema_prepare(text, text[], boolean);
