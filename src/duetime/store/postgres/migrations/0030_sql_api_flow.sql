-- The SQL API under the queues' keyed flow rules (docs/flow-control.md "Creates through the SQL
-- API"). A node's create evaluates a rule's key expression on each task and keeps uniqueness,
-- debounce and throttle ledgers (duetime.lifecycle.flow, duetime.store.core.flow); SQL applies
-- what it can apply exactly as the node does and refuses the rest, naming the task's queue, so
-- no task made here escapes a rule of its queue:
--   - a keyed limit (key_limit) takes a task's own concurrency_key as its key, as the node does
--     when a task gives one: with a keyed rate limit the task's flow_key is that key;
--   - a task without a concurrency_key, in a queue whose key_limit names any other expression,
--     is refused (the node would evaluate it);
--   - a queue with a uniqueness window, a debounce or a throttle refuses every SQL create.
-- sql_api_store now inserts the flow key; create_task_v1 and create_tasks_v1 call the check.

-- :fresh with the flow keys of the queues' keyed limits, or a refusal naming the queue of the
-- first task (in order) whose queue has a rule this path cannot apply; :prefixes is each task's
-- field path prefix ('' for a single create, 'tasks.N.' in a batch). One read of the queues the
-- tasks name; tasks of queues without keyed rules are returned as they are.
CREATE FUNCTION sql_api_flow(tenant text, fresh task_input[], prefixes text[])
RETURNS task_input[] LANGUAGE plpgsql AS $$
DECLARE
    rules jsonb := '{}';
    rule jsonb;
    key jsonb;
    i integer;
BEGIN
    SELECT coalesce(jsonb_object_agg(q.name, jsonb_build_object(
               'refuse', CASE WHEN jsonb_typeof(q.flow -> 'unique') = 'object' THEN 'a uniqueness window'
                              WHEN jsonb_typeof(q.flow -> 'debounce') = 'object' THEN 'a debounce'
                              WHEN jsonb_typeof(q.flow -> 'throttle') = 'object' THEN 'a throttle'
                         END,
               'key', CASE WHEN jsonb_typeof(q.flow -> 'key_limit') = 'object'
                           THEN q.flow -> 'key_limit' -> 'key' END,
               'rate', q.key_rate IS NOT NULL)), '{}')
    INTO rules
    FROM queues q
    WHERE q.tenant_id = tenant AND q.flow IS NOT NULL
      AND q.name = ANY(ARRAY(SELECT DISTINCT f.queue FROM unnest(fresh) AS f));
    IF rules = '{}' THEN
        RETURN fresh;
    END IF;
    FOR i IN 1 .. cardinality(fresh) LOOP
        rule := rules -> fresh[i].queue;
        CONTINUE WHEN rule IS NULL;
        IF rule ->> 'refuse' IS NOT NULL THEN
            PERFORM sql_api_fail(prefixes[i] || 'queue', format(
                'queue %s has %s, which only a node applies: create its tasks over HTTP',
                quote_literal(fresh[i].queue), rule ->> 'refuse'));
        END IF;
        key := rule -> 'key';
        CONTINUE WHEN key IS NULL OR jsonb_typeof(key) = 'null';
        IF fresh[i].concurrency_key IS NULL AND key <> '"concurrency_key"' THEN
            PERFORM sql_api_fail(prefixes[i] || 'concurrency_key', format(
                'queue %s limits by the key %s, which only a node evaluates: give the task''s '
                'key as concurrency_key, or create it over HTTP',
                quote_literal(fresh[i].queue), key));
        END IF;
        IF (rule ->> 'rate')::boolean THEN
            fresh[i].flow_key := coalesce(fresh[i].concurrency_key, '');
        END IF;
    END LOOP;
    RETURN fresh;
END $$;

CREATE OR REPLACE FUNCTION sql_api_store(tenant text, fresh task_input[], single boolean, parents boolean)
RETURNS task_created_v1[] LANGUAGE plpgsql AS $$
DECLARE
    moment timestamptz := statement_timestamp();
    wanted uuid[];
    counted record;
    i integer;
    k integer := 1;
    j integer;
    ids uuid[];
    statuses text[];
    runs timestamptz[];
    made task_created_v1[] := '{}';
    hit record;
    ready boolean := false;
    scheduled boolean := false;
BEGIN
    IF parents THEN
        wanted := ARRAY(SELECT DISTINCT p FROM unnest(fresh) AS f, unnest(f.depends_on) AS p);
        -- Locked parents (in id order): their completion waits for our task_deps rows, or we
        -- read its end (as task_parents_lock).
        PERFORM 1 FROM tasks WHERE id = ANY(wanted) ORDER BY id FOR NO KEY UPDATE;
        FOR i IN 1 .. cardinality(fresh) LOOP
            CONTINUE WHEN cardinality(fresh[i].depends_on) = 0;
            SELECT count(*) AS n,
                   count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled'))
                       AS pending,
                   coalesce(bool_or(status IN ('failed', 'cancelled')), false) AS dead
            INTO counted
            FROM tasks WHERE id = ANY(fresh[i].depends_on) AND tenant_id = tenant;
            IF counted.n < cardinality(fresh[i].depends_on) THEN
                PERFORM sql_api_fail('depends_on', format('no task with id %L', (
                    SELECT p FROM unnest(fresh[i].depends_on) AS p
                    WHERE NOT EXISTS (SELECT 1 FROM tasks
                                      WHERE id = p AND tenant_id = tenant) LIMIT 1)));
            END IF;
            fresh[i].pending_parents := counted.pending;
            fresh[i].dep_failed := counted.dead;
        END LOOP;
        UPDATE tasks SET has_dependents = true WHERE id = ANY(wanted) AND NOT has_dependents;
    END IF;

    WITH ins AS (
        INSERT INTO tasks AS t (
            id, tenant_id, name, queue, status, version, target_type, target, payload,
            idempotency_key, priority, retry, timeout_seconds, depends_on, pending_parents,
            has_dependents, concurrency_key, labels, attempts, series_start, run_at, due_at,
            created_at, updated_at, finished_at, last_error, cancel_requested, request_hash,
            payload_ref, flow_key)
        SELECT
            f.id, f.tenant_id, f.name, f.queue,
            CASE WHEN f.dep_failed THEN 'failed'
                 WHEN f.pending_parents > 0 THEN 'blocked'
                 WHEN coalesce(f.run_at, moment) <= moment THEN 'ready'
                 ELSE 'scheduled' END,
            1, f.target_type, f.target, f.payload, f.idempotency_key, f.priority, f.retry,
            f.timeout_seconds, f.depends_on, f.pending_parents, false, f.concurrency_key,
            f.labels, 0, 0, coalesce(f.run_at, moment), coalesce(f.run_at, moment), moment,
            moment,
            CASE WHEN f.dep_failed THEN moment END,
            CASE WHEN f.dep_failed THEN 'a task it depends on failed or was cancelled' END,
            false, f.request_hash, f.payload_ref, f.flow_key
        FROM unnest(fresh) AS f
        ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING t.id, t.status, t.run_at
    )
    SELECT array_agg(ins.id), array_agg(ins.status), array_agg(ins.run_at)
    INTO ids, statuses, runs
    FROM ins;

    -- RETURNING gives the inserted rows in the order of fresh (those that met an existing key
    -- left out); a position found out of that order is looked up.
    FOR i IN 1 .. cardinality(fresh) LOOP
        IF k <= coalesce(cardinality(ids), 0) AND ids[k] = fresh[i].id THEN
            j := k;
            k := k + 1;
        ELSE
            j := array_position(ids, fresh[i].id);
        END IF;
        IF j IS NOT NULL THEN
            made[i] := ROW(ids[j], true, statuses[j], runs[j])::task_created_v1;
            IF statuses[j] = 'ready' THEN
                ready := true;
            ELSIF statuses[j] = 'scheduled' THEN
                scheduled := true;
            ELSIF statuses[j] = 'blocked' THEN
                INSERT INTO task_deps (parent_id, child_id)
                SELECT p, ids[j] FROM unnest(fresh[i].depends_on) AS p
                ON CONFLICT DO NOTHING;
            END IF;
        ELSE
            SELECT t.id, t.status, t.run_at, t.request_hash INTO hit FROM tasks t
            WHERE t.tenant_id = tenant AND t.idempotency_key = fresh[i].idempotency_key;
            IF single AND hit.request_hash LIKE 'sql:%'
               AND hit.request_hash <> fresh[i].request_hash THEN
                RAISE EXCEPTION 'idempotency_key % was used for task % with different fields; '
                                'repeat that request exactly, or use another key',
                                quote_literal(fresh[i].idempotency_key), hit.id
                    USING ERRCODE = '23505', COLUMN = 'idempotency_key';
            END IF;
            made[i] := ROW(hit.id, false, hit.status, hit.run_at)::task_created_v1;
        END IF;
    END LOOP;

    -- Worker tasks only: a ready one wakes the nodes' long polls ("pulls"), a scheduled one
    -- their promoters. The payload is no node's token, so every node listens to it.
    IF ready THEN
        PERFORM pg_notify(current_schema() || '_ready', 'sql:pulls');
    END IF;
    IF scheduled THEN
        PERFORM pg_notify(current_schema() || '_due', 'sql');
    END IF;
    RETURN made;
END $$;

-- The API: one task with named arguments (defaults as the HTTP API's; the target defaults to a
-- worker target, the one kind made here).
CREATE OR REPLACE FUNCTION create_task_v1(
    queue text DEFAULT 'default',
    payload jsonb DEFAULT NULL,
    name text DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    delay_seconds double precision DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    priority integer DEFAULT 0,
    timeout_seconds double precision DEFAULT 30,
    retry jsonb DEFAULT NULL,
    depends_on text[] DEFAULT '{}',
    concurrency_key text DEFAULT NULL,
    labels jsonb DEFAULT '{}',
    payload_ref text DEFAULT NULL,
    target jsonb DEFAULT '{"type": "worker"}')
RETURNS task_created_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    tenant text;
    max_pending bigint;
    rate double precision;
    max_bytes integer;
    actor text := current_setting('duetime.actor', true);
    task task_input;
    made task_created_v1[];
BEGIN
    SELECT p.tenant_id, tn.max_pending_tasks, tn.max_creates_per_second, s.max_payload_bytes
    INTO tenant, max_pending, rate, max_bytes
    FROM sql_producers p JOIN tenants tn ON tn.id = p.tenant_id CROSS JOIN sql_api_settings s
    WHERE p.role_name = session_user;
    IF tenant IS NULL THEN
        PERFORM sql_api_refuse_role();
    END IF;
    task := sql_api_task('', tenant, max_bytes, 0, name, queue, run_at, delay_seconds,
                         target, payload, idempotency_key, priority, retry, timeout_seconds,
                         depends_on, concurrency_key, labels, payload_ref);
    IF max_pending IS NOT NULL OR rate IS NOT NULL THEN
        PERFORM sql_api_admit(tenant, max_pending, rate, 1);
    END IF;
    -- The audit trail names the role; the caller's own setting is back on return.
    PERFORM set_config('duetime.actor', 'sql:' || session_user, true);
    made := sql_api_store(tenant, sql_api_flow(tenant, ARRAY[task], '{""}'), true,
                          cardinality(task.depends_on) > 0);
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    RETURN made[1];
END $$;

-- The API: up to 1,000 tasks all or nothing, a JSON array of objects with the HTTP API's task
-- fields (POST /v1/tasks/batch's "tasks"); one result per item, in order. A repeated
-- idempotency key in the batch answers the first item's task; an existing one, that task.
CREATE OR REPLACE FUNCTION create_tasks_v1(tasks jsonb)
RETURNS SETOF task_created_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    tenant text;
    max_pending bigint;
    rate double precision;
    max_bytes integer;
    actor text := current_setting('duetime.actor', true);
    n integer;
    fresh task_input[] := '{}';
    prefixes text[] := '{}';
    slots integer[] := '{}';
    keys jsonb := '{}';
    parents boolean := false;
    spec jsonb;
    task task_input;
    made task_created_v1[];
    answered task_created_v1[] := '{}';
    i integer := 0;
BEGIN
    SELECT p.tenant_id, tn.max_pending_tasks, tn.max_creates_per_second, s.max_payload_bytes
    INTO tenant, max_pending, rate, max_bytes
    FROM sql_producers p JOIN tenants tn ON tn.id = p.tenant_id CROSS JOIN sql_api_settings s
    WHERE p.role_name = session_user;
    IF tenant IS NULL THEN
        PERFORM sql_api_refuse_role();
    END IF;
    IF jsonb_typeof(tasks) IS DISTINCT FROM 'array' THEN
        PERFORM sql_api_fail('tasks', 'must be a JSON array of tasks');
    END IF;
    n := jsonb_array_length(tasks);
    IF n < 1 OR n > 1000 THEN
        PERFORM sql_api_fail('tasks', 'must hold 1 to 1000 tasks');
    END IF;
    FOR spec IN SELECT value FROM jsonb_array_elements(tasks) LOOP
        task := sql_api_spec('tasks.' || i || '.', tenant, max_bytes, i, spec);
        IF task.idempotency_key IS NOT NULL AND keys ? task.idempotency_key THEN
            slots := slots || -(keys ->> task.idempotency_key)::integer;
        ELSE
            fresh[cardinality(fresh) + 1] := task;
            prefixes := prefixes || ('tasks.' || i || '.');
            slots := slots || cardinality(fresh);
            parents := parents OR cardinality(task.depends_on) > 0;
            IF task.idempotency_key IS NOT NULL THEN
                keys := keys || jsonb_build_object(task.idempotency_key, cardinality(fresh));
            END IF;
        END IF;
        i := i + 1;
    END LOOP;
    IF max_pending IS NOT NULL OR rate IS NOT NULL THEN
        PERFORM sql_api_admit(tenant, max_pending, rate, n);
    END IF;
    PERFORM set_config('duetime.actor', 'sql:' || session_user, true);
    made := sql_api_store(tenant, sql_api_flow(tenant, fresh, prefixes), false, parents);
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    -- A repeated key answers the task of the item it repeats (slot -k: the k-th of fresh).
    IF cardinality(fresh) < n THEN
        FOR i IN 1 .. n LOOP
            answered[i] := CASE WHEN slots[i] > 0 THEN made[slots[i]]
                                ELSE ROW(made[-slots[i]].id, false, made[-slots[i]].status,
                                         made[-slots[i]].run_at)::task_created_v1 END;
        END LOOP;
        made := answered;
    END IF;
    RETURN QUERY SELECT * FROM unnest(made);
END $$;


-- CREATE OR REPLACE resets what a function's definition does not state: the API functions'
-- fixed search path (as 0024_sql_api.sql sets it), and no new function executable by PUBLIC.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('create_task_v1', 'create_tasks_v1')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION sql_api_flow(text, task_input[], text[]) FROM PUBLIC;
