-- The SQL API evaluates the queues' key expressions and keeps their uniqueness windows
-- (docs/flow-control.md "Creates through the SQL API"), as a node's create does
-- (duetime.flow.keys, duetime.lifecycle.flow, duetime.store.core.flow):
--   - sql_api_key evaluates a key expression on a task. A value it cannot write exactly as the
--     node's canonical JSON does (a number with a fraction or an exponent, an object, an array)
--     refuses the create with 22023 naming the payload, so no key made here differs from the
--     key a node makes of the same task;
--   - a keyed limit takes the task's concurrency_key, else its key expression's value, as its
--     key (and as its concurrency_key under max_concurrency_per_key);
--   - a uniqueness window holds its key's flow_ledger row for the create's transaction: a live
--     window whose task is in one of its states answers with that task (created false), else
--     the create takes the window;
--   - a debounce absorbs a create into its waiting task, and a throttle delays it to its slot.
-- It also builds a batch of plain items in one statement (sql_api_plain, below).
--
-- A task's own window is create_task_v1's new last argument "unique" and a create_tasks_v1
-- item's "unique", checked as over HTTP (sql_api_unique_rule).
--
-- Contract, as 0024's: create_task_v1 and create_tasks_v1 keep their results, and every call of
-- create_task_v1 made before stays valid (the new argument is last, with a default). A
-- create a window answers returns (the window's task, false, its status, its run_at); when that
-- task has left the hot store a single create returns (its id, false, NULL, NULL) and a batch
-- raises 23505 COLUMN 'tasks.N.queue' (as HTTP's 200 "retired" and 409).

-- A key as it is stored (duetime.flow.keys.bounded): NULL for '', its sha256: digest when over
-- 200 bytes of UTF-8, so an index entry stays small.
CREATE FUNCTION sql_api_bounded(key text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN key = '' THEN NULL
                WHEN octet_length(convert_to(key, 'UTF8')) > 200
                THEN 'sha256:' || encode(sha256(convert_to(key, 'UTF8')), 'hex')
                ELSE key END
$$;

-- The key of task t under the key expression expr (a term or a JSON array of up to four), or
-- NULL when it has none; field names the payload in a refusal.
CREATE FUNCTION sql_api_key(expr jsonb, t task_input, field text)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    terms jsonb := CASE WHEN jsonb_typeof(expr) = 'array' THEN expr ELSE jsonb_build_array(expr) END;
    term text;
    body jsonb;
    v jsonb;
    parts text[] := '{}';
    present boolean := false;
BEGIN
    FOR term IN SELECT value FROM jsonb_array_elements_text(terms) LOOP
        IF term = 'name' THEN
            v := to_jsonb(t.name);
        ELSIF term = 'concurrency_key' THEN
            v := to_jsonb(t.concurrency_key);
        ELSIF term LIKE 'labels.%' THEN
            v := t.labels -> substr(term, 8);
        ELSE
            body := coalesce(body, t.payload::jsonb);
            -- A path's keys are never all digits, so #> never steps into an array.
            v := CASE WHEN term = 'payload' THEN body
                      ELSE body #> string_to_array(substr(term, 9), '.') END;
        END IF;
        IF v = 'null'::jsonb THEN
            v := NULL;
        END IF;
        IF v IS NOT NULL THEN
            present := true;
            IF jsonb_typeof(v) NOT IN ('string', 'boolean')
               AND NOT (jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]+$') THEN
                PERFORM sql_api_fail(field, format(
                    'queue %s keys tasks by %s, whose value here is %s: a key made through SQL '
                    'takes text, true/false or a whole number; create this task over HTTP',
                    quote_literal(t.queue), term,
                    CASE jsonb_typeof(v) WHEN 'number' THEN 'a number with a fraction or an exponent'
                                         ELSE 'an ' || jsonb_typeof(v) END));
            END IF;
        END IF;
        parts := parts || coalesce(v::text, 'null');
    END LOOP;
    IF NOT present THEN
        RETURN NULL;
    END IF;
    RETURN sql_api_bounded(CASE WHEN jsonb_array_length(terms) = 1 THEN v #>> '{}'
                                ELSE '[' || array_to_string(parts, ',') || ']' END);
END $$;

-- A task's own uniqueness window checked as the HTTP API checks it (duetime.flow.rules.unique_rule
-- with literal, duetime.flow.keys.parse_key; field paths under :field): {"key": the key itself |
-- "key_from": an expression, "period": an ISO 8601 duration, "states": [...]}. Returned as
-- {"literal": the key as stored, or "key": the expression, "seconds": the period, "states"}.
CREATE FUNCTION sql_api_unique_rule(raw jsonb, field text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    name text;
    terms jsonb;
    term jsonb;
    text_term text;
    where_at text;
    parts text[];
    period text;
    seconds double precision;
    states text[] := '{}';
    known text[] := ARRAY['scheduled', 'blocked', 'ready', 'running', 'retrying', 'succeeded',
                          'failed', 'cancelled'];
    out jsonb;
    i integer := 0;
BEGIN
    IF jsonb_typeof(raw) <> 'object' THEN
        PERFORM sql_api_fail(field, 'must be an object');
    END IF;
    FOR name IN SELECT jsonb_object_keys(raw) LOOP
        IF name NOT IN ('key', 'key_from', 'period', 'states') THEN
            PERFORM sql_api_fail(field || '.' || name, format(
                'unknown field %s; one of key, key_from, period, states', quote_literal(name)));
        END IF;
    END LOOP;
    IF (raw ? 'key') = (raw ? 'key_from') THEN
        PERFORM sql_api_fail(field, 'give key (the key itself) or key_from (an expression)');
    END IF;
    IF raw ? 'key' THEN
        IF jsonb_typeof(raw -> 'key') <> 'string'
           OR char_length(raw ->> 'key') NOT BETWEEN 1 AND 255 THEN
            PERFORM sql_api_fail(field || '.key', 'a key is text of 1-255 characters');
        END IF;
        out := jsonb_build_object('literal', sql_api_bounded(raw ->> 'key'));
    ELSE
        terms := CASE WHEN jsonb_typeof(raw -> 'key_from') = 'string'
                      THEN jsonb_build_array(raw -> 'key_from') ELSE raw -> 'key_from' END;
        IF jsonb_typeof(terms) <> 'array' OR jsonb_array_length(terms) NOT BETWEEN 1 AND 4 THEN
            PERFORM sql_api_fail(field || '.key_from',
                                 'a key is one term or a list of 1 to 4 terms');
        END IF;
        FOR term IN SELECT value FROM jsonb_array_elements(terms) LOOP
            where_at := field || '.key_from'
                        || CASE WHEN jsonb_typeof(raw -> 'key_from') = 'string' THEN ''
                                ELSE '.' || i END;
            IF jsonb_typeof(term) <> 'string' OR char_length(term #>> '{}') NOT BETWEEN 1 AND 300
            THEN
                PERFORM sql_api_fail(where_at, 'a key term is text of 1-300 characters');
            END IF;
            text_term := term #>> '{}';
            IF text_term IN ('name', 'concurrency_key', 'payload') THEN
                NULL;
            ELSIF text_term LIKE 'labels.%' THEN
                IF substr(text_term, 8) !~ '^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$' THEN
                    PERFORM sql_api_fail(where_at, format(
                        '%s: a label key is 1-63 of A-Z a-z 0-9 . _ / - (starting with a letter '
                        'or digit)', quote_literal(text_term)));
                END IF;
            ELSIF text_term LIKE 'payload.%' THEN
                parts := string_to_array(substr(text_term, 9), '.');
                IF EXISTS (SELECT 1 FROM unnest(parts) AS k
                           WHERE char_length(k) NOT BETWEEN 1 AND 64
                              OR k !~ '^[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*$') THEN
                    PERFORM sql_api_fail(where_at, format(
                        '%s: a payload path is object keys of A-Z a-z 0-9 _ - (not all digits), '
                        'joined by dots', quote_literal(text_term)));
                END IF;
            ELSE
                PERFORM sql_api_fail(where_at, format(
                    '%s is not a key term: use name, concurrency_key, labels.<key>, payload or '
                    'payload.<path>', quote_literal(text_term)));
            END IF;
            i := i + 1;
        END LOOP;
        out := jsonb_build_object('key', terms);
    END IF;
    IF NOT raw ? 'period' THEN
        PERFORM sql_api_fail(field || '.period', 'a period is required, e.g. PT1H');
    END IF;
    period := CASE WHEN jsonb_typeof(raw -> 'period') = 'string' THEN raw ->> 'period' END;
    parts := regexp_match(period,
        '^P(?:([0-9]{1,6})W)?(?:([0-9]{1,6})D)?(?:T(?:([0-9]{1,6})H)?(?:([0-9]{1,6})M)?'
        '(?:([0-9]{1,9}(?:[.][0-9]{1,6})?)S)?)?$');
    IF parts IS NULL OR period IN ('P', 'PT') OR period LIKE '%T' THEN
        PERFORM sql_api_fail(field || '.period', 'an ISO 8601 duration of weeks, days, hours, '
                             'minutes and seconds, e.g. PT0.5S, PT5M, P1D');
    END IF;
    seconds := ((((coalesce(parts[1]::float8, 0) * 7 + coalesce(parts[2]::float8, 0)) * 24
                  + coalesce(parts[3]::float8, 0)) * 60 + coalesce(parts[4]::float8, 0)) * 60
                + coalesce(parts[5]::float8, 0));
    IF NOT seconds BETWEEN 0.001 AND 31622400 THEN
        PERFORM sql_api_fail(field || '.period', 'must be between PT0.001S and P366D');
    END IF;
    IF coalesce(raw -> 'states', 'null') = 'null' THEN
        -- On its way or succeeded: a failed or cancelled task frees its key.
        states := array_remove(array_remove(known, 'failed'), 'cancelled');
    ELSIF jsonb_typeof(raw -> 'states') <> 'array' OR raw -> 'states' = '[]' THEN
        PERFORM sql_api_fail(field || '.states', 'a non-empty list of task statuses');
    ELSE
        i := 0;
        FOR term IN SELECT value FROM jsonb_array_elements(raw -> 'states') LOOP
            IF jsonb_typeof(term) <> 'string' OR NOT (term #>> '{}') = ANY(known) THEN
                PERFORM sql_api_fail(field || '.states.' || i, format(
                    '%s is not a task status; one of %s',
                    CASE jsonb_typeof(term) WHEN 'string' THEN quote_literal(term #>> '{}')
                                            WHEN 'boolean' THEN initcap(term::text)
                                            WHEN 'null' THEN 'None' ELSE term::text END,
                    array_to_string(known, ', ')));
            END IF;
            i := i + 1;
        END LOOP;
        states := ARRAY(SELECT k FROM unnest(known) WITH ORDINALITY AS u (k, n)
                        WHERE raw -> 'states' ? k ORDER BY n);
    END IF;
    RETURN out || jsonb_build_object('seconds', seconds, 'states', to_jsonb(states));
END $$;

-- The ledger of keyed rules as the node's creates keep it (duetime.store.core.flow): a key's row
-- held, made empty when absent and locked until the caller's transaction ends, so a concurrent
-- create of the key (here or on a node) waits, then reads what this one left
-- (flow_ledger_hold); and written back (flow_ledger_put).
CREATE FUNCTION sql_api_hold(tenant text, queue text, kind text, key text) RETURNS flow_ledger
LANGUAGE sql AS $$
    INSERT INTO flow_ledger AS l (tenant_id, queue, kind, key) VALUES (tenant, queue, kind, key)
    ON CONFLICT ON CONSTRAINT flow_ledger_pkey DO UPDATE SET until = l.until
    RETURNING l.*
$$;

CREATE FUNCTION sql_api_put(tenant text, queue text, kind text, key text, task_id uuid,
                            since timestamptz, until timestamptz, states text[])
RETURNS void LANGUAGE sql AS $$
    UPDATE flow_ledger AS l SET task_id = sql_api_put.task_id, since = sql_api_put.since,
                                until = sql_api_put.until, states = sql_api_put.states
    WHERE l.tenant_id = sql_api_put.tenant AND l.queue = sql_api_put.queue
      AND l.kind = sql_api_put.kind AND l.key = sql_api_put.key
$$;

-- When a debounced task whose burst began at :since runs after a create at :now
-- (duetime.flow.timing.debounce_due).
CREATE FUNCTION sql_api_debounce_due(now timestamptz, since timestamptz, period double precision,
                                     max_wait double precision)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT least(now + make_interval(secs => period), since + make_interval(secs => max_wait))
$$;

-- :fresh under their queues' keyed rules and their own windows (owns), as the node decides each
-- create (duetime.store.core.flow.decide), task by task, each seeing what the earlier ones did:
--   keyed    the tasks as they are to be stored: keys, a debounced or throttled run_at, an
--            earlier task's payload replaced by a later one's that it absorbed;
--   answers  per position, the task that answers it (a uniqueness window's, or the debounced
--            task that absorbed it: an earlier task of the call or a stored one), NULL: make it;
--   windows  the window's key each made task took (the create points it at the task that
--            answers should the insert meet an idempotency key);
--   absorbs  per position, how many later tasks of the call the task absorbed.
-- answers, windows and absorbs are NULL when no task of the call has a rule. :prefixes is each
-- task's field path prefix ('' for a single create, 'tasks.N.' in a batch).
DROP FUNCTION sql_api_flow(text, task_input[], text[]);
CREATE FUNCTION sql_api_flow(
    tenant text, fresh task_input[], prefixes text[], owns jsonb[],
    OUT keyed task_input[], OUT answers uuid[], OUT windows text[], OUT absorbs integer[])
LANGUAGE plpgsql AS $$
DECLARE
    moment timestamptz := statement_timestamp();
    rules jsonb := '{}';
    rule jsonb;
    found_key text;
    held flow_ledger;
    earlier integer;
    ids uuid[];
    window_rule jsonb;
    window_key text;
    window_seconds double precision;
    window_states text[];
    window_status text;
    debounce_rule jsonb;
    period double precision;
    max_wait double precision;
    due timestamptz;
    absorber uuid;
    throttle_rule jsonb;
    rate double precision;
    burst integer;
    step interval;
    arrival timestamptz;
    tat timestamptz;
    slot timestamptz;
    i integer;
BEGIN
    keyed := fresh;
    SELECT coalesce(jsonb_object_agg(q.name, jsonb_build_object(
               'key', CASE WHEN jsonb_typeof(q.flow -> 'key_limit') = 'object'
                           THEN q.flow -> 'key_limit' -> 'key' END,
               'per_key', q.max_concurrency_per_key IS NOT NULL,
               'rate', q.key_rate IS NOT NULL,
               'unique', CASE WHEN jsonb_typeof(q.flow -> 'unique') = 'object'
                              THEN q.flow -> 'unique' END,
               'debounce', CASE WHEN jsonb_typeof(q.flow -> 'debounce') = 'object'
                                THEN q.flow -> 'debounce' END,
               'throttle', CASE WHEN jsonb_typeof(q.flow -> 'throttle') = 'object'
                                THEN q.flow -> 'throttle' END)), '{}')
    INTO rules
    FROM queues q
    WHERE q.tenant_id = tenant AND q.flow IS NOT NULL
      AND q.name = ANY(ARRAY(SELECT DISTINCT f.queue FROM unnest(fresh) AS f));
    IF rules = '{}' AND coalesce(array_remove(owns, NULL), '{}') = '{}' THEN
        RETURN;  -- nothing answered, no window taken, nothing absorbed
    END IF;
    answers := array_fill(NULL::uuid, ARRAY[cardinality(fresh)]);
    windows := array_fill(NULL::text, ARRAY[cardinality(fresh)]);
    absorbs := array_fill(0, ARRAY[cardinality(fresh)]);
    ids := ARRAY(SELECT f.id FROM unnest(fresh) AS f);
    FOR i IN 1 .. cardinality(fresh) LOOP
        rule := coalesce(rules -> fresh[i].queue, '{}');
        CONTINUE WHEN rule = '{}' AND owns[i] IS NULL;
        IF jsonb_typeof(rule -> 'key') <> 'null' THEN
            found_key := coalesce(keyed[i].concurrency_key,
                            sql_api_key(rule -> 'key', keyed[i], prefixes[i] || 'payload'));
            IF (rule ->> 'per_key')::boolean AND keyed[i].concurrency_key IS NULL THEN
                keyed[i].concurrency_key := found_key;
            END IF;
            IF (rule ->> 'rate')::boolean THEN
                keyed[i].flow_key := coalesce(found_key, '');
            END IF;
        END IF;
        -- A repeated idempotency key is answered first, before any rule is looked at.
        CONTINUE WHEN keyed[i].idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM tasks t
            WHERE t.tenant_id = tenant AND t.idempotency_key = keyed[i].idempotency_key);

        -- 1. unique: the task's own window (its key given, or evaluated on the task as given),
        -- else the queue's; one whose key has no value for the task does not apply. A live
        -- window whose task is in one of its states answers; else the create takes it, below.
        window_rule := owns[i];
        window_key := CASE WHEN window_rule IS NOT NULL
                           THEN coalesce(window_rule ->> 'literal',
                                         sql_api_key(window_rule -> 'key', fresh[i],
                                                     prefixes[i] || 'payload')) END;
        IF window_key IS NOT NULL THEN
            window_seconds := (window_rule ->> 'seconds')::double precision;
        ELSIF jsonb_typeof(rule -> 'unique') = 'object' THEN
            window_rule := rule -> 'unique';
            window_key := sql_api_key(window_rule -> 'key', keyed[i], prefixes[i] || 'payload');
            window_seconds := extract(epoch FROM (window_rule ->> 'period')::interval);
        END IF;
        IF window_key IS NOT NULL THEN
            held := sql_api_hold(tenant, keyed[i].queue, 'unique', window_key);
            IF held.until > moment AND held.task_id IS NOT NULL THEN
                earlier := array_position(ids, held.task_id);
                IF earlier IS NOT NULL AND earlier < i THEN
                    -- An earlier task of this call took the window; it is made as blocked,
                    -- ready or scheduled.
                    window_status := CASE
                        WHEN cardinality(keyed[earlier].depends_on) > 0 THEN 'blocked'
                        WHEN coalesce(keyed[earlier].run_at, moment) <= moment THEN 'ready'
                        ELSE 'scheduled' END;
                ELSE
                    SELECT t.status INTO window_status FROM tasks t
                    WHERE t.id = held.task_id AND t.tenant_id = tenant;
                    IF NOT FOUND THEN
                        IF prefixes[i] = '' THEN
                            answers[i] := held.task_id;
                            CONTINUE;
                        END IF;
                        RAISE EXCEPTION USING
                            MESSAGE = format('%squeue: unique key %s of queue %s is held by task '
                                             '%s until %s; that task has left the hot store',
                                             prefixes[i], quote_literal(window_key),
                                             quote_literal(keyed[i].queue), held.task_id,
                                             to_char(held.until AT TIME ZONE 'UTC',
                                                     'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                            ERRCODE = '23505', COLUMN = prefixes[i] || 'queue';
                    END IF;
                END IF;
                IF window_status = ANY(held.states) THEN
                    answers[i] := held.task_id;
                    CONTINUE;
                END IF;
            END IF;
            window_states := ARRAY(SELECT jsonb_array_elements_text(window_rule -> 'states'));
        END IF;

        -- 2. debounce: a live burst whose task still waits absorbs the create (the latest
        -- payload, due period later but not past max_wait from the burst's first create);
        -- otherwise the task starts a burst, due period from now.
        debounce_rule := rule -> 'debounce';
        found_key := CASE WHEN jsonb_typeof(debounce_rule) = 'object'
                          THEN sql_api_key(debounce_rule -> 'key', keyed[i],
                                           prefixes[i] || 'payload') END;
        IF found_key IS NOT NULL THEN
            period := extract(epoch FROM (debounce_rule ->> 'period')::interval);
            max_wait := extract(epoch FROM (debounce_rule ->> 'max_wait')::interval);
            held := sql_api_hold(tenant, keyed[i].queue, 'debounce', found_key);
            absorber := NULL;
            IF held.until > moment AND held.task_id IS NOT NULL AND held.since IS NOT NULL THEN
                due := sql_api_debounce_due(moment, held.since, period, max_wait);
                earlier := array_position(ids, held.task_id);
                IF earlier IS NOT NULL AND earlier < i THEN
                    IF answers[earlier] IS NULL AND cardinality(keyed[earlier].depends_on) = 0
                    THEN
                        keyed[earlier].payload := keyed[i].payload;
                        keyed[earlier].payload_ref := keyed[i].payload_ref;
                        keyed[earlier].run_at := due;
                        absorbs[earlier] := absorbs[earlier] + 1;
                        absorber := held.task_id;
                    END IF;
                ELSE
                    UPDATE tasks t SET
                        payload = keyed[i].payload,
                        payload_ref = keyed[i].payload_ref,
                        run_at = due,
                        due_at = due,
                        absorbed = t.absorbed + 1,
                        absorbed_at = moment,
                        version = t.version + 1,
                        updated_at = moment
                    WHERE t.id = held.task_id AND t.tenant_id = tenant AND t.status = 'scheduled'
                    RETURNING t.id INTO absorber;
                END IF;
            END IF;
            IF absorber IS NOT NULL THEN
                IF window_key IS NOT NULL THEN
                    PERFORM sql_api_put(tenant, keyed[i].queue, 'unique', window_key, absorber,
                                        moment, moment + make_interval(secs => window_seconds),
                                        window_states);
                END IF;
                answers[i] := absorber;
                CONTINUE;
            END IF;
            PERFORM sql_api_put(tenant, keyed[i].queue, 'debounce', found_key, keyed[i].id,
                                moment, moment + make_interval(secs => max_wait), NULL);
            keyed[i].run_at := sql_api_debounce_due(moment, moment, period, max_wait);
        END IF;

        -- 3. throttle: the task runs at its key's next free slot (the generic cell rate
        -- algorithm, duetime.flow.timing.throttle_slot; the ledger's until is the key's tat).
        throttle_rule := rule -> 'throttle';
        found_key := CASE WHEN jsonb_typeof(throttle_rule) = 'object'
                          THEN sql_api_key(throttle_rule -> 'key', keyed[i],
                                           prefixes[i] || 'payload') END;
        IF found_key IS NOT NULL THEN
            rate := split_part(throttle_rule ->> 'rate', '/', 1)::double precision
                    / CASE split_part(throttle_rule ->> 'rate', '/', 2)
                          WHEN 'm' THEN 60 WHEN 'h' THEN 3600 ELSE 1 END;
            burst := coalesce((throttle_rule ->> 'burst')::integer, 1);
            held := sql_api_hold(tenant, keyed[i].queue, 'throttle', found_key);
            arrival := greatest(moment, keyed[i].run_at);
            step := make_interval(secs => 1.0 / rate);
            tat := greatest(arrival, held.until);
            slot := greatest(arrival, tat - step * (burst - 1));
            PERFORM sql_api_put(tenant, keyed[i].queue, 'throttle', found_key, NULL, NULL,
                                tat + step, NULL);
            IF slot > arrival THEN
                keyed[i].run_at := slot;
            END IF;
        END IF;

        IF window_key IS NOT NULL THEN
            PERFORM sql_api_put(tenant, keyed[i].queue, 'unique', window_key, keyed[i].id, moment,
                                moment + make_interval(secs => window_seconds), window_states);
            windows[i] := window_key;
        END IF;
    END LOOP;
END $$;

-- The windows a create took (windows, by position in made) now name the task that answers
-- each: the one its idempotency key found when a racing create stored that key meanwhile.
CREATE FUNCTION sql_api_repoint(tenant text, queues text[], windows text[], made task_created_v1[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. cardinality(windows) LOOP
        CONTINUE WHEN windows[i] IS NULL OR made[i].created;
        UPDATE flow_ledger SET task_id = made[i].id
        WHERE tenant_id = tenant AND queue = queues[i] AND kind = 'unique' AND key = windows[i];
    END LOOP;
END $$;

-- The answer a window gives: its task as it is now, or (id, false, NULL, NULL) when it has
-- left the hot store.
CREATE FUNCTION sql_api_answer(tenant text, task_id uuid) RETURNS task_created_v1
LANGUAGE sql STABLE AS $$
    SELECT ROW(task_id, false, t.status, t.run_at)::task_created_v1
    FROM (SELECT 1) AS one
    LEFT JOIN tasks t ON t.id = task_id AND t.tenant_id = tenant
$$;

-- create_task_v1 takes a task's own uniqueness window as "unique" (quoted: a reserved word), its
-- last argument: a new signature, so the function is made again and granted anew below.
DROP FUNCTION create_task_v1(text, jsonb, text, timestamptz, double precision, text, integer,
                             double precision, jsonb, text[], text, jsonb, text, jsonb);
CREATE FUNCTION create_task_v1(
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
    target jsonb DEFAULT '{"type": "worker"}',
    "unique" jsonb DEFAULT NULL)
RETURNS task_created_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    tenant text;
    max_pending bigint;
    rate double precision;
    max_bytes integer;
    actor text := current_setting('duetime.actor', true);
    flowing boolean;
    task task_input;
    own jsonb;
    flowed record;
    window_key text;
    made task_created_v1[];
BEGIN
    -- With the producer, whether the task's queue has flow rules (most have none: their creates
    -- skip sql_api_flow).
    SELECT p.tenant_id, tn.max_pending_tasks, tn.max_creates_per_second, s.max_payload_bytes,
           q.name IS NOT NULL
    INTO tenant, max_pending, rate, max_bytes, flowing
    FROM sql_producers p JOIN tenants tn ON tn.id = p.tenant_id CROSS JOIN sql_api_settings s
    LEFT JOIN queues q ON q.tenant_id = p.tenant_id AND q.name = create_task_v1.queue
                      AND q.flow IS NOT NULL
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
    IF coalesce(create_task_v1."unique", 'null') <> 'null' THEN
        own := sql_api_unique_rule(create_task_v1."unique", 'unique');
    END IF;
    -- The audit trail names the role (a debounce updates a task here); the caller's own
    -- setting is back on return.
    PERFORM set_config('duetime.actor', 'sql:' || session_user, true);
    IF flowing OR own IS NOT NULL THEN
        SELECT * INTO flowed FROM sql_api_flow(tenant, ARRAY[task], '{""}', ARRAY[own]);
        IF flowed.answers[1] IS NOT NULL THEN
            PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
            RETURN sql_api_answer(tenant, flowed.answers[1]);
        END IF;
        task := flowed.keyed[1];
        window_key := flowed.windows[1];
    END IF;
    made := sql_api_store(tenant, ARRAY[task], true, cardinality(task.depends_on) > 0);
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    IF window_key IS NOT NULL THEN
        PERFORM sql_api_repoint(tenant, ARRAY[task.queue], ARRAY[window_key], made);
    END IF;
    RETURN made[1];
END $$;

-- Batches of plain items are checked and built in one statement (ADR 0015). sql_api_spec and
-- sql_api_task check an item with two PL/pgSQL calls, which name its first refused field; for
-- 1,000 items that is about half the call. A batch whose every item is plain - each field
-- absent, null where the API allows null, or of the common shape tested below - is built in one
-- statement instead, exactly as those two build it. Any other batch (a run_at, a retry policy,
-- parents, a payload_ref, a repeated idempotency key, anything a check might refuse) goes item
-- by item. The test is conservative: an item it calls plain is one sql_api_spec accepts, so a
-- refusal is always named by the per-item checks.

-- A text field of a plain item: absent, null, or 1..high characters without a control character
-- (sql_api_text's test).
CREATE FUNCTION sql_api_plain_text(value jsonb, high integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT value IS NULL OR value = 'null'
        OR (jsonb_typeof(value) = 'string' AND char_length(value #>> '{}') BETWEEN 1 AND high
            AND (value #>> '{}') !~ E'[\\x01-\\x1f\\x7f-\\x9f]')
$$;

-- The labels of a plain item: at most 64, each key 1-63 of its characters, each value text of at
-- most 256 characters without a control character (sql_api_task's tests).
CREATE FUNCTION sql_api_plain_labels(labels jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT count(*) <= 64
           AND coalesce(bool_and(char_length(l.key) <= 63
                                 AND l.key ~ '^[A-Za-z0-9][A-Za-z0-9._/-]*$'
                                 AND jsonb_typeof(l.value) = 'string'
                                 AND char_length(l.value #>> '{}') <= 256
                                 AND (l.value #>> '{}') !~ E'[\\x01-\\x1f\\x7f-\\x9f]'), true)
    FROM jsonb_each(labels) AS l
$$;

-- Whether one item of create_tasks_v1 is plain (see above); each cast is reached only once its
-- text is known to hold, and a test that meets an absent field (NULL) says no. One expression
-- without a subquery, so that the planner inlines it (a SQL function it calls costs ~20 us).
CREATE FUNCTION sql_api_plain_item(spec jsonb, max_bytes integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(spec) IS DISTINCT FROM 'object' THEN false ELSE coalesce(
        spec - '{name, queue, delay_seconds, target, payload, idempotency_key, priority,
                 timeout_seconds, depends_on, concurrency_key, labels, run_at, retry,
                 payload_ref}'::text[] = '{}'
        AND spec -> 'target' = '{"type": "worker"}'
        AND coalesce(spec -> 'run_at', 'null') = 'null'
        AND coalesce(spec -> 'retry', 'null') = 'null'
        AND coalesce(spec -> 'payload_ref', 'null') = 'null'
        AND coalesce(spec -> 'depends_on', '[]') = '[]'
        AND sql_api_plain_text(spec -> 'name', 200)
        AND sql_api_plain_text(spec -> 'idempotency_key', 255)
        AND sql_api_plain_text(spec -> 'concurrency_key', 255)
        AND CASE WHEN NOT spec ? 'queue' THEN true
                 WHEN jsonb_typeof(spec -> 'queue') <> 'string' THEN false
                 ELSE char_length(spec ->> 'queue') <= 128
                      AND spec ->> 'queue' ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$' END
        AND CASE WHEN coalesce(spec -> 'delay_seconds', 'null') = 'null' THEN true
                 WHEN jsonb_typeof(spec -> 'delay_seconds') <> 'number' THEN false
                 ELSE (spec ->> 'delay_seconds')::numeric BETWEEN 0 AND 315360000 END
        AND CASE WHEN NOT spec ? 'priority' THEN true
                 WHEN jsonb_typeof(spec -> 'priority') <> 'number'
                      OR spec ->> 'priority' !~ '^-?[0-9]{1,5}$' THEN false
                 ELSE (spec ->> 'priority')::integer BETWEEN -32768 AND 32767 END
        AND CASE WHEN NOT spec ? 'timeout_seconds' THEN true
                 WHEN jsonb_typeof(spec -> 'timeout_seconds') <> 'number' THEN false
                 ELSE (spec ->> 'timeout_seconds')::numeric BETWEEN 0.001 AND 3600 END
        AND CASE WHEN coalesce(spec -> 'labels', '{}') = '{}' THEN true
                 WHEN jsonb_typeof(spec -> 'labels') <> 'object' THEN false
                 ELSE sql_api_plain_labels(spec -> 'labels') END
        AND coalesce(spec -> 'payload', 'null')::text !~ '[0-9]{19}'
        AND octet_length(coalesce(spec -> 'payload', 'null')::text) <= max_bytes, false)
    END
$$;

-- The items of :tasks built as sql_api_spec and sql_api_task build them, in order, when every
-- item is plain and no idempotency key repeats; NULL otherwise.
CREATE FUNCTION sql_api_plain(tenant text, max_bytes integer, tasks jsonb)
RETURNS task_input[] LANGUAGE sql VOLATILE AS $$
    WITH items AS (
        SELECT s.spec, (s.ord - 1)::integer AS seq, sql_api_plain_item(s.spec, max_bytes) AS plain
        FROM jsonb_array_elements(tasks) WITH ORDINALITY AS s (spec, ord)
    ), verdict AS (
        SELECT bool_and(a.plain)
               AND count(DISTINCT a.spec ->> 'idempotency_key')
                   = count(a.spec ->> 'idempotency_key') AS plain
        FROM items a
    ), fields AS (
        SELECT i.seq, i.spec ->> 'name' AS name, coalesce(i.spec ->> 'queue', 'default') AS queue,
               coalesce(i.spec -> 'payload', 'null') AS payload,
               i.spec ->> 'idempotency_key' AS idempotency_key,
               coalesce((i.spec ->> 'priority')::integer, 0) AS priority,
               -- (LEAST passes over NULL: only a given number is bounded.)
               CASE WHEN i.spec ? 'timeout_seconds'
                    THEN least((i.spec ->> 'timeout_seconds')::numeric, 1e300)::float8
                    ELSE 30 END AS timeout_seconds,
               CASE WHEN jsonb_typeof(i.spec -> 'delay_seconds') = 'number'
                    THEN least((i.spec ->> 'delay_seconds')::numeric, 1e300)::float8
                    END AS delay_seconds,
               i.spec ->> 'concurrency_key' AS concurrency_key,
               coalesce(i.spec -> 'labels', '{}') AS labels,
               '{"max_attempts": 5, "initial_delay_seconds": 1.0, "max_delay_seconds": 3600.0,
                 "multiplier": 2.0, "jitter": 0.1}'::jsonb AS policy
        FROM items i
        WHERE (SELECT v.plain FROM verdict v)
    )
    -- No rows when the batch is not plain: array_agg then gives NULL.
    SELECT array_agg(ROW(
               -- An RFC 9562 UUIDv7 as sql_api_task makes them (:seq orders a batch's ids).
               encode(int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16)
                               | 28672 | (f.seq & 4095))
                      || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8), 'hex')::uuid,
               tenant, f.name, f.queue, 'worker', '{"type": "worker"}'::jsonb, f.payload::text,
               f.idempotency_key, f.priority, f.policy, f.timeout_seconds, '{}'::uuid[], 0, false,
               f.concurrency_key, f.labels, NULL, NULL,
               statement_timestamp() + make_interval(secs => f.delay_seconds),
               NULL,
               CASE WHEN f.idempotency_key IS NOT NULL THEN 'sql:' || md5(jsonb_build_array(
                   f.name, f.queue, NULL::timestamp, f.delay_seconds::numeric,
                   '{"type": "worker"}'::jsonb, f.payload, f.idempotency_key, f.priority,
                   f.policy, f.timeout_seconds::numeric, '{}'::uuid[], f.concurrency_key,
                   f.labels, NULL::text)::text) END,
               NULL, NULL)::task_input ORDER BY f.seq)
    FROM fields f
$$;

-- The API: up to 1,000 tasks all or nothing, a JSON array of objects with the HTTP API's task
-- fields (POST /v1/tasks/batch's "tasks"); one result per item, in order. A repeated
-- idempotency key in the batch answers the first item's task; an existing one, that task; a
-- live uniqueness window, its task (an earlier item's when that item took it).
-- A batch of plain items is built by sql_api_plain, any other item by item.
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
    owns jsonb[] := '{}';
    slots integer[] := '{}';
    keys jsonb := '{}';
    parents boolean := false;
    spec jsonb;
    task task_input;
    flowed record;
    kept task_input[] := '{}';
    kept_windows text[] := '{}';
    places integer[] := '{}';
    stored task_created_v1[];
    made task_created_v1[] := '{}';
    answered task_created_v1[] := '{}';
    ids uuid[];
    at integer;
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
    fresh := sql_api_plain(tenant, max_bytes, tasks);
    IF fresh IS NOT NULL THEN
        prefixes := ARRAY(SELECT 'tasks.' || k || '.' FROM generate_series(0, n - 1) AS k);
    ELSE
        fresh := '{}';
        FOR spec IN SELECT value FROM jsonb_array_elements(tasks) LOOP
            -- A task's own window ("unique") is checked after its other fields, as over HTTP.
            task := sql_api_spec('tasks.' || i || '.', tenant, max_bytes, i,
                                 CASE WHEN jsonb_typeof(spec) = 'object' THEN spec - 'unique'
                                      ELSE spec END);
            IF task.idempotency_key IS NOT NULL AND keys ? task.idempotency_key THEN
                slots := slots || -(keys ->> task.idempotency_key)::integer;
            ELSE
                fresh[cardinality(fresh) + 1] := task;
                owns := owns || CASE WHEN coalesce(spec -> 'unique', 'null') <> 'null'
                                     THEN sql_api_unique_rule(spec -> 'unique',
                                                              'tasks.' || i || '.unique') END;
                prefixes := prefixes || ('tasks.' || i || '.');
                slots := slots || cardinality(fresh);
                parents := parents OR cardinality(task.depends_on) > 0;
                IF task.idempotency_key IS NOT NULL THEN
                    keys := keys || jsonb_build_object(task.idempotency_key, cardinality(fresh));
                END IF;
            END IF;
            i := i + 1;
        END LOOP;
    END IF;
    IF max_pending IS NOT NULL OR rate IS NOT NULL THEN
        PERFORM sql_api_admit(tenant, max_pending, rate, n);
    END IF;
    PERFORM set_config('duetime.actor', 'sql:' || session_user, true);
    SELECT * INTO flowed FROM sql_api_flow(tenant, fresh, prefixes, owns);
    IF coalesce(array_remove(flowed.answers, NULL), '{}') = '{}' THEN
        made := sql_api_store(tenant, flowed.keyed, false, parents);
        stored := made;
        kept := flowed.keyed;
        kept_windows := flowed.windows;
    ELSE
        -- What a window answers is not made; the rest is stored, and each of fresh gets its
        -- result.
        FOR i IN 1 .. cardinality(fresh) LOOP
            IF flowed.answers[i] IS NULL THEN
                kept[cardinality(kept) + 1] := flowed.keyed[i];
                kept_windows := kept_windows || flowed.windows[i];
                places := places || cardinality(kept);
            ELSE
                places := places || 0;
            END IF;
        END LOOP;
        stored := sql_api_store(tenant, kept, false, parents);
        ids := ARRAY(SELECT f.id FROM unnest(fresh) AS f);
        FOR i IN 1 .. cardinality(fresh) LOOP
            IF places[i] > 0 THEN
                made[i] := stored[places[i]];
            ELSE
                at := array_position(ids, flowed.answers[i]);
                made[i] := CASE WHEN at IS NOT NULL
                                THEN ROW(made[at].id, false, made[at].status,
                                         made[at].run_at)::task_created_v1
                                ELSE sql_api_answer(tenant, flowed.answers[i]) END;
            END IF;
        END LOOP;
        -- A task that absorbed later tasks of the call counts them, as if each had come after
        -- it was made.
        UPDATE tasks t SET absorbed = a.n, absorbed_at = statement_timestamp(),
                           version = t.version + a.n
        FROM unnest(ARRAY(SELECT m.id FROM unnest(made) AS m), flowed.absorbs,
                    ARRAY(SELECT m.created FROM unnest(made) AS m)) AS a (id, n, created)
        WHERE a.n > 0 AND a.created AND t.id = a.id;
    END IF;
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    IF coalesce(array_remove(kept_windows, NULL), '{}') <> '{}' THEN
        PERFORM sql_api_repoint(tenant, ARRAY(SELECT k.queue FROM unnest(kept) AS k),
                                kept_windows, stored);
    END IF;
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
    grantee text;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('create_task_v1', 'create_tasks_v1')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    END LOOP;
    fn := 'create_task_v1(text, jsonb, text, timestamptz, double precision, text, integer, '
          'double precision, jsonb, text[], text, jsonb, text, jsonb, jsonb)'::regprocedure;
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
    -- Roles granted before this version keep the single create.
    FOR grantee IN SELECT role_name FROM sql_producers LOOP
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = grantee) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, grantee);
        END IF;
    END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION sql_api_bounded(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_key(jsonb, task_input, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_hold(text, text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_put(text, text, text, text, uuid, timestamptz, timestamptz, text[])
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_debounce_due(timestamptz, timestamptz, double precision,
                                               double precision) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_flow(text, task_input[], text[], jsonb[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_unique_rule(jsonb, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_repoint(text, text[], text[], task_created_v1[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_answer(text, uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_plain_text(jsonb, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_plain_labels(jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_plain_item(jsonb, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sql_api_plain(text, integer, jsonb) FROM PUBLIC;
