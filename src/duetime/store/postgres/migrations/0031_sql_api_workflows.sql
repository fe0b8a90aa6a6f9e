-- Workflows through the SQL API (docs/api.md "SQL API", "Workflows"): create_workflow_v1 takes
-- the body of POST /v1/workflows in the caller's transaction and records it as a request; after
-- that transaction commits, a node makes the workflow from it with the same code, rules and
-- checks as POST /v1/workflows (duetime.api.sql_intake), or records the problem that call would
-- have answered. The request exists only if the caller's transaction commits; its NOTIFY (at
-- commit) wakes the nodes. A workflow's rules (its nodes' fields, push targets and the
-- private-address guard, the graph, quotas) are the node's; what SQL checks here is only what
-- keeps the request table bounded and answers idempotent repeats at once.
--
-- Contract, as 0024's: create_workflow_v1 and workflow_request_v1 keep their signatures and
-- meaning; errors as 0024 lists them, plus DT429 CONSTRAINT 'pending_workflow_requests' when a
-- tenant has 1,000 requests no node has taken yet.

CREATE TABLE sql_workflow_requests (
    id               uuid PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    role_name        text NOT NULL,
    body             jsonb NOT NULL,
    idempotency_key  text,
    fingerprint      text NOT NULL,
    requested_at     timestamptz NOT NULL,
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'made', 'refused')),
    -- A node taking the request holds it until then; past it, another node may take it.
    taken_until      timestamptz,
    workflow_id      uuid,
    problem          jsonb,
    ended_at         timestamptz
);
-- An idempotency key names one request that is pending or made (a refused one made nothing: its
-- key is free again, as after a refused POST).
CREATE UNIQUE INDEX sql_workflow_requests_key_idx
    ON sql_workflow_requests (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND state <> 'refused';
CREATE INDEX sql_workflow_requests_pending_idx ON sql_workflow_requests (tenant_id, requested_at)
    WHERE state = 'pending';
CREATE INDEX sql_workflow_requests_ended_idx ON sql_workflow_requests (ended_at)
    WHERE state <> 'pending';

CREATE TYPE workflow_requested_v1 AS (
    id       uuid,
    created  boolean
);

CREATE TYPE workflow_request_v1 AS (
    id            uuid,
    state         text,
    workflow_id   uuid,
    problem       jsonb,
    requested_at  timestamptz,
    ended_at      timestamptz
);

-- The functions a granted role may execute: grant-sql and revoke-sql walk this list.
CREATE FUNCTION sql_api_functions() RETURNS SETOF regprocedure LANGUAGE sql STABLE AS $$
    SELECT p.oid::regprocedure FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace
      AND p.proname IN ('create_task_v1', 'create_tasks_v1', 'cancel_task_v1', 'api_version',
                        'create_workflow_v1', 'workflow_request_v1')
$$;

CREATE OR REPLACE FUNCTION sql_api_grant(role_name text, tenant text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        RAISE EXCEPTION 'role % does not exist', quote_ident(role_name)
            USING ERRCODE = '42704', HINT = 'create it first: CREATE ROLE ... LOGIN PASSWORD ...';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tenants WHERE id = tenant) THEN
        RAISE EXCEPTION 'tenant % not found', quote_literal(tenant) USING ERRCODE = 'P0002';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), role_name);
    FOR fn IN SELECT * FROM sql_api_functions() LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, role_name);
    END LOOP;
    INSERT INTO sql_producers (role_name, tenant_id) VALUES (role_name, tenant)
    ON CONFLICT ON CONSTRAINT sql_producers_pkey
    DO UPDATE SET tenant_id = EXCLUDED.tenant_id, granted_at = now();
END $$;

CREATE OR REPLACE FUNCTION sql_api_revoke(role_name text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    fn regprocedure;
    had boolean;
BEGIN
    DELETE FROM sql_producers p WHERE p.role_name = sql_api_revoke.role_name;
    had := FOUND;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        FOR fn IN SELECT * FROM sql_api_functions() LOOP
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %I', fn, role_name);
        END LOOP;
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM %I', current_schema(), role_name);
    END IF;
    RETURN had;
END $$;

-- The workflow or pending request an idempotency key of :tenant names (NULL: none), refused
-- with 23505 when it was requested through create_workflow_v1 with another body (fingerprint).
CREATE FUNCTION sql_api_workflow_repeat(tenant text, key text, print text)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    found_id uuid;
    found_print text;
BEGIN
    SELECT w.id, w.request_hash INTO found_id, found_print
    FROM workflows w WHERE w.tenant_id = tenant AND w.idempotency_key = key;
    IF found_id IS NULL THEN
        SELECT r.id, r.fingerprint INTO found_id, found_print
        FROM sql_workflow_requests r
        WHERE r.tenant_id = tenant AND r.idempotency_key = key AND r.state <> 'refused';
    END IF;
    IF found_print LIKE 'sql:%' AND found_print <> print THEN
        PERFORM sql_api_fail('idempotency_key', format(
            'idempotency_key %L was used for workflow %s with a different request; '
            'repeat that request exactly, or use another key', key, found_id), '23505');
    END IF;
    RETURN found_id;
END $$;

-- The request of a workflow (the body of POST /v1/workflows, a JSON object), made by a node
-- after the caller's transaction commits; returns its id, which is the workflow's id once made,
-- and whether this call made the request. An idempotency_key met before answers that workflow
-- (or that request, while no node has taken it yet) with created false; 23505 when it was
-- through this function with another body (a workflow made over HTTP is answered without
-- comparing, as a task's key across paths is).
CREATE FUNCTION create_workflow_v1(workflow jsonb)
RETURNS workflow_requested_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    tenant text;
    key text;
    written text := workflow::text;
    print text;
    found_id uuid;
    waiting bigint;
    new_id uuid;
BEGIN
    SELECT p.tenant_id INTO tenant FROM sql_producers p WHERE p.role_name = session_user;
    IF tenant IS NULL THEN
        PERFORM sql_api_refuse_role();
    END IF;
    IF jsonb_typeof(workflow) IS DISTINCT FROM 'object' THEN
        PERFORM sql_api_fail('body', 'must be a JSON object: the body of POST /v1/workflows');
    END IF;
    -- POST /v1/workflows reads at most 64 MiB (duetime.api.app.BATCH_BODY_LIMIT_BYTES).
    IF octet_length(written) > 67108864 AND sql_api_compact_size(workflow) > 67108864 THEN
        PERFORM sql_api_fail('body', 'is over the 67108864-byte limit of a workflow', '54000');
    END IF;
    print := 'sql:' || md5(written);
    IF jsonb_typeof(workflow -> 'idempotency_key') = 'string' THEN
        key := workflow ->> 'idempotency_key';
        found_id := sql_api_workflow_repeat(tenant, key, print);
        IF found_id IS NOT NULL THEN
            RETURN ROW(found_id, false)::workflow_requested_v1;
        END IF;
    END IF;
    SELECT count(*) INTO waiting FROM (
        SELECT 1 FROM sql_workflow_requests r
        WHERE r.tenant_id = tenant AND r.state = 'pending' LIMIT 1000) AS w;
    IF waiting >= 1000 THEN
        RAISE EXCEPTION 'tenant % has 1000 workflow requests no node has made yet',
                        quote_literal(tenant)
            USING ERRCODE = 'DT429', CONSTRAINT = 'pending_workflow_requests',
                  HINT = 'retry after 1 second(s); is a duetime node running?';
    END IF;
    -- An RFC 9562 UUIDv7, as sql_api_task makes a task's, so workflows of both paths sort by
    -- creation.
    new_id := encode(int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16)
                              | 28672)
                     || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8), 'hex')::uuid;
    INSERT INTO sql_workflow_requests
        (id, tenant_id, role_name, body, idempotency_key, fingerprint, requested_at)
    VALUES (new_id, tenant, session_user, workflow, key, print, now())
    ON CONFLICT (tenant_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL AND state <> 'refused' DO NOTHING;
    IF NOT FOUND THEN
        -- A concurrent call with the same key committed first (this one waited for it).
        RETURN ROW(sql_api_workflow_repeat(tenant, key, print), false)::workflow_requested_v1;
    END IF;
    PERFORM pg_notify(current_schema() || '_requests', 'sql');
    RETURN ROW(new_id, true)::workflow_requested_v1;
END $$;

-- A request of the caller's tenant: pending (no node has made it yet), made (workflow_id is the
-- workflow: the request's id, or the workflow an idempotency key met), or refused (problem is
-- the RFC 9457 problem POST /v1/workflows would have answered). P0002 for no such request of
-- the tenant. Ended requests are kept for a day.
CREATE FUNCTION workflow_request_v1(request_id uuid)
RETURNS workflow_request_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    tenant text;
    found workflow_request_v1;
BEGIN
    SELECT p.tenant_id INTO tenant FROM sql_producers p WHERE p.role_name = session_user;
    IF tenant IS NULL THEN
        PERFORM sql_api_refuse_role();
    END IF;
    SELECT r.id, r.state, r.workflow_id, r.problem, r.requested_at, r.ended_at INTO found
    FROM sql_workflow_requests r WHERE r.id = request_id AND r.tenant_id = tenant;
    IF found.id IS NULL THEN
        RAISE EXCEPTION 'no workflow request % of this tenant', request_id
            USING ERRCODE = 'P0002';
    END IF;
    RETURN found;
END $$;

DO $$
DECLARE
    fn regprocedure;
    grantee text;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('create_workflow_v1', 'workflow_request_v1')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
        -- Roles granted before this version get the new functions too.
        FOR grantee IN SELECT role_name FROM sql_producers LOOP
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = grantee) THEN
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, grantee);
            END IF;
        END LOOP;
    END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION sql_api_functions() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_workflow_repeat(text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_grant(text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_revoke(text) FROM PUBLIC;
