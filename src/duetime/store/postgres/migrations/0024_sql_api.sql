-- The SQL API, version 1 (docs/api.md "SQL API"; docs/adr/0012-sql-api-in-duetimes-own-schema.md):
-- functions an application calls inside its own transaction to create and cancel tasks. The task
-- exists only if that transaction commits; its NOTIFY is delivered at commit.
--
-- Contract: create_task_v1, create_tasks_v1, cancel_task_v1 and api_version keep their
-- signatures and meaning; a change that would break a caller comes as *_v2 beside them.
-- Errors name the field in the message ("tasks.3.queue: ...") and in the error's COLUMN field:
--   22023  invalid_parameter_value   what HTTP refuses with 422
--   54000  program_limit_exceeded    a payload over max_payload_bytes (HTTP's 413)
--   23505  unique_violation          an idempotency key used with other fields (HTTP's 409)
--   DT429  (duetime)                 over a tenant quota (HTTP's 429); CONSTRAINT names the quota
--   42501  insufficient_privilege    the login role is granted no tenant
--   P0002  no_data_found             cancel: no such task of the tenant (HTTP's 404)
--   55000  object_not_in_prerequisite_state   cancel: the task has ended (HTTP's 409)
--
-- Every function runs as its owner (SECURITY DEFINER) with the search path fixed to this schema
-- (set below, by name of the schema this migration runs in), so a caller needs no privilege on
-- any table and cannot redirect a name through its own search path. Only worker tasks are made
-- here: every rule a worker task's create obeys can be checked in SQL, while a push target's
-- (URL parsing, the private-address guard, sealing a broker URL's secret) needs the node.

-- Which tenant a login role creates for: `duetime tenant grant-sql TENANT ROLE`.
CREATE TABLE sql_producers (
    role_name   text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    granted_at  timestamptz NOT NULL DEFAULT now()
);

-- The server bounds SQL checks against; grant-sql writes the node's settings here.
CREATE TABLE sql_api_settings (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    max_payload_bytes  integer NOT NULL
);
INSERT INTO sql_api_settings (max_payload_bytes) VALUES (262144);

CREATE TYPE task_created_v1 AS (
    id       uuid,
    created  boolean,
    status   text,
    run_at   timestamptz
);

CREATE FUNCTION api_version() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;

CREATE FUNCTION sql_api_fail(field text, detail text, code text DEFAULT '22023')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = field || ': ' || detail, ERRCODE = code, COLUMN = field;
END $$;

-- Text the API reads as an identifier: min..max characters, no control character.
CREATE FUNCTION sql_api_text(value text, field text, low integer, high integer)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF char_length(value) < low THEN
        PERFORM sql_api_fail(field, format('must have at least %s character(s)', low));
    ELSIF char_length(value) > high THEN
        PERFORM sql_api_fail(field, format('must have at most %s characters', high));
    ELSIF value ~ E'[\\x01-\\x1f\\x7f-\\x9f]' THEN
        PERFORM sql_api_fail(field, 'must not contain control characters or lone surrogates');
    END IF;
    RETURN value;
END $$;

-- A number of a JSON value: refused unless a finite number (or an integer when asked).
CREATE FUNCTION sql_api_number(value jsonb, field text, whole boolean DEFAULT false)
RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'number' THEN
        PERFORM sql_api_fail(field, CASE WHEN whole THEN 'must be an integer'
                                         ELSE 'must be a number' END);
    ELSIF whole AND value::text !~ '^-?[0-9]+$' THEN
        PERFORM sql_api_fail(field, 'must be an integer');
    END IF;
    RETURN value::text::numeric;
END $$;

CREATE FUNCTION sql_api_range(value double precision, field text, low double precision,
                              high double precision, low_open boolean DEFAULT false)
RETURNS double precision LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF value IS NULL OR value = 'NaN' OR value < low OR value > high
       OR (low_open AND value = low) THEN
        PERFORM sql_api_fail(field, format('must be %s %s and at most %s',
                                           CASE WHEN low_open THEN 'greater than'
                                                ELSE 'at least' END, low, high));
    END IF;
    RETURN value;
END $$;

-- The size of the payload as the HTTP API counts it: its compact JSON text. PostgreSQL writes a
-- space after each ":" and "," between members, which is taken off here.
CREATE FUNCTION sql_api_compact_size(payload jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT octet_length(payload::text) - coalesce(sum(
        CASE jsonb_typeof(v)
            WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1, 0)
            WHEN 'array' THEN greatest(jsonb_array_length(v) - 1, 0)
            ELSE 0 END), 0)
    FROM jsonb_path_query(payload, 'strict $.**') AS v
$$;

-- One task checked as the HTTP API checks a TaskCreate (duetime.api.schemas), field paths under
-- :prefix ("tasks.3." in a batch), and built as task_input for sql_api_store. The fingerprint of
-- an idempotent create is "sql:" and an md5 of the fields as checked, defaults filled in.
CREATE FUNCTION sql_api_task(
    prefix text, tenant text, max_bytes integer, seq integer,
    name text, queue text, run_at timestamptz, delay_seconds double precision, target jsonb,
    payload jsonb, idempotency_key text, priority integer, retry jsonb,
    timeout_seconds double precision, depends_on text[], concurrency_key text, labels jsonb,
    payload_ref text)
RETURNS task_input LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    t task_input;
    body text;
    size bigint;
    kv record;
    policy jsonb := '{"max_attempts": 5, "initial_delay_seconds": 1.0,
                      "max_delay_seconds": 3600.0, "multiplier": 2.0, "jitter": 0.1}';
    parents uuid[] := '{}';
    item text;
    i integer := 0;
BEGIN
    -- target: a worker target, nothing else in it (checked in full only when it is not exactly
    -- that: the checks below run on every create, so the common case costs no query)
    IF target = '{"type": "worker"}' THEN
        NULL;
    ELSIF target IS NULL THEN
        PERFORM sql_api_fail(prefix || 'target', 'required');
    ELSIF jsonb_typeof(target) <> 'object'
          OR jsonb_typeof(target -> 'type') IS DISTINCT FROM 'string'
          OR target ->> 'type' NOT IN ('worker', 'http', 'amqp', 'nats', 'redis') THEN
        PERFORM sql_api_fail(prefix || 'target', 'must be an object whose type is one of '
                                                 'worker, http, amqp, nats, redis');
    ELSIF target ->> 'type' <> 'worker' THEN
        PERFORM sql_api_fail(prefix || 'target.type',
                             'the SQL API creates worker tasks; create push tasks over HTTP');
    ELSE
        FOR kv IN SELECT key FROM jsonb_object_keys(target) AS key WHERE key <> 'type' LOOP
            PERFORM sql_api_fail(prefix || 'target.' || kv.key, 'unknown field');
        END LOOP;
    END IF;
    IF name IS NOT NULL THEN
        PERFORM sql_api_text(name, prefix || 'name', 1, 200);
    END IF;
    -- Lengths apart from the patterns: a bounded repeat ({0,127}) cost ~5 us a match.
    IF queue IS NULL OR char_length(queue) > 128 OR queue !~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$' THEN
        PERFORM sql_api_fail(prefix || 'queue',
                             '1-128 characters: letters, digits, ".", "_", ":", "-"; '
                             'starts alphanumeric');
    END IF;
    IF run_at IS NOT NULL AND (run_at < '1970-01-01T00:00:00Z' OR run_at >= '9000-01-01T00:00:00Z'
                               OR run_at IN ('infinity', '-infinity')) THEN
        PERFORM sql_api_fail(prefix || 'run_at',
                             'must be from 1970-01-01T00:00:00Z up to (not including) 9000-01-01');
    END IF;
    IF delay_seconds IS NOT NULL THEN
        IF NOT (delay_seconds >= 0 AND delay_seconds <= 315360000) THEN
            PERFORM sql_api_range(delay_seconds, prefix || 'delay_seconds', 0, 315360000);
        END IF;
        IF run_at IS NOT NULL THEN
            PERFORM sql_api_fail(prefix || 'delay_seconds',
                                 'give run_at or delay_seconds, not both');
        END IF;
    END IF;
    IF idempotency_key IS NOT NULL THEN
        PERFORM sql_api_text(idempotency_key, prefix || 'idempotency_key', 1, 255);
    END IF;
    IF priority IS NULL OR priority < -32768 OR priority > 32767 THEN
        PERFORM sql_api_fail(prefix || 'priority', 'must be from -32768 to 32767');
    END IF;
    IF retry IS NOT NULL THEN
        IF jsonb_typeof(retry) <> 'object' THEN
            PERFORM sql_api_fail(prefix || 'retry', 'must be an object');
        END IF;
        FOR kv IN SELECT key, value FROM jsonb_each(retry) LOOP
            CASE kv.key
            WHEN 'max_attempts' THEN
                IF sql_api_number(kv.value, prefix || 'retry.max_attempts', true)
                   NOT BETWEEN 1 AND 1000 THEN
                    PERFORM sql_api_fail(prefix || 'retry.max_attempts', 'must be from 1 to 1000');
                END IF;
            WHEN 'initial_delay_seconds', 'max_delay_seconds' THEN
                PERFORM sql_api_range(
                    least(sql_api_number(kv.value, prefix || 'retry.' || kv.key), 1e300)::float8,
                    prefix || 'retry.' || kv.key, 0.001, 2592000);
            WHEN 'multiplier' THEN
                PERFORM sql_api_range(least(sql_api_number(kv.value, prefix || 'retry.multiplier'),
                                            1e300)::float8, prefix || 'retry.multiplier', 1, 100);
            WHEN 'jitter' THEN
                PERFORM sql_api_range(
                    greatest(least(sql_api_number(kv.value, prefix || 'retry.jitter'), 1e300),
                             -1e300)::float8, prefix || 'retry.jitter', 0, 1);
            ELSE
                PERFORM sql_api_fail(prefix || 'retry.' || kv.key, 'unknown field');
            END CASE;
            policy := policy || jsonb_build_object(kv.key, kv.value);
        END LOOP;
        IF (policy ->> 'max_delay_seconds')::numeric < (policy ->> 'initial_delay_seconds')::numeric
        THEN
            PERFORM sql_api_fail(prefix || 'retry.max_delay_seconds',
                                 'must be >= initial_delay_seconds');
        END IF;
    END IF;
    IF timeout_seconds IS NULL OR NOT (timeout_seconds >= 0.001 AND timeout_seconds <= 3600) THEN
        PERFORM sql_api_range(timeout_seconds, prefix || 'timeout_seconds', 0.001, 3600);
    END IF;
    IF depends_on IS NULL THEN
        PERFORM sql_api_fail(prefix || 'depends_on', 'must be a list of task ids');
    ELSIF cardinality(depends_on) > 100 THEN
        PERFORM sql_api_fail(prefix || 'depends_on', 'must have at most 100 items');
    END IF;
    FOREACH item IN ARRAY depends_on LOOP
        IF item IS NULL OR char_length(item) > 64 OR item !~* ('^(urn:uuid:)?[{]?[0-9a-f]{8}-?'
                                                                '[0-9a-f]{4}-?[0-9a-f]{4}-?'
                                                                '[0-9a-f]{4}-?[0-9a-f]{12}[}]?$')
        THEN
            PERFORM sql_api_fail(prefix || 'depends_on.' || i, 'must be a task id (a UUID)');
        END IF;
        IF NOT regexp_replace(item, '^urn:uuid:', '', 'i')::uuid = ANY(parents) THEN
            parents := parents || regexp_replace(item, '^urn:uuid:', '', 'i')::uuid;
        END IF;
        i := i + 1;
    END LOOP;
    IF concurrency_key IS NOT NULL THEN
        PERFORM sql_api_text(concurrency_key, prefix || 'concurrency_key', 1, 255);
    END IF;
    IF labels IS NULL OR jsonb_typeof(labels) <> 'object' THEN
        PERFORM sql_api_fail(prefix || 'labels', 'must be an object of strings');
    END IF;
    IF labels <> '{}' THEN
        FOR kv IN SELECT key, value FROM jsonb_each(labels) LOOP
            IF char_length(kv.key) > 63 OR kv.key !~ '^[A-Za-z0-9][A-Za-z0-9._/-]*$' THEN
                PERFORM sql_api_fail(prefix || 'labels.' || kv.key || '.[key]',
                                     'a label key is 1-63 letters, digits, ".", "_", "/", "-"');
            ELSIF jsonb_typeof(kv.value) <> 'string' THEN
                PERFORM sql_api_fail(prefix || 'labels.' || kv.key, 'must be a string');
            END IF;
            PERFORM sql_api_text(kv.value #>> '{}', prefix || 'labels.' || kv.key, 0, 256);
        END LOOP;
        IF (SELECT count(*) FROM jsonb_object_keys(labels)) > 64 THEN
            PERFORM sql_api_fail(prefix || 'labels', 'must have at most 64 items');
        END IF;
    END IF;
    payload := coalesce(payload, 'null');
    IF payload_ref IS NOT NULL THEN
        IF char_length(payload_ref) NOT BETWEEN 1 AND 2048 OR payload_ref !~ '^[ -~]+$' THEN
            PERFORM sql_api_fail(prefix || 'payload_ref',
                                 'must be 1-2048 characters of printable ASCII');
        ELSIF payload <> 'null' THEN
            PERFORM sql_api_fail(prefix || 'payload_ref',
                                 'give payload or payload_ref, not both (the reference is handed '
                                 'on instead of a payload)');
        END IF;
    END IF;
    body := payload::text;
    IF body ~ '[0-9]{19}' AND EXISTS (
        SELECT 1 FROM jsonb_path_query(payload, 'strict $.** ? (@.type() == "number")') AS n
        WHERE (n::text !~ '[.]' AND (n::text::numeric > 18446744073709551615
                                     OR n::text::numeric < -9223372036854775808))
           OR abs(n::text::numeric) > 1.7976931348623157e308) THEN
        PERFORM sql_api_fail(prefix || 'payload',
                             'must not contain integers beyond 64 bits or infinite numbers');
    END IF;
    IF octet_length(body) > max_bytes THEN
        size := sql_api_compact_size(payload);
        IF size > max_bytes THEN
            PERFORM sql_api_fail(prefix || 'payload', format(
                'is %s bytes encoded; the limit is %s', size, max_bytes),
                '54000');
        END IF;
    END IF;

    -- An RFC 9562 UUIDv7 as the node makes them (48-bit milliseconds, a 12-bit sequence, 62
    -- random bits), so ids of both paths sort by creation; :seq orders a batch's ids.
    t.id := encode(int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16)
                            | 28672 | (seq & 4095))
                   || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8), 'hex')::uuid;
    t.tenant_id := tenant;
    t.name := name;
    t.queue := queue;
    t.target_type := 'worker';
    t.target := '{"type": "worker"}';
    t.payload := body;
    t.idempotency_key := idempotency_key;
    t.priority := priority;
    t.retry := policy;
    t.timeout_seconds := timeout_seconds;
    t.depends_on := parents;
    t.pending_parents := 0;
    t.dep_failed := false;
    t.concurrency_key := concurrency_key;
    t.labels := labels;
    t.run_at := CASE WHEN delay_seconds IS NOT NULL
                     THEN statement_timestamp() + make_interval(secs => delay_seconds)
                     ELSE run_at END;
    t.payload_ref := payload_ref;
    IF idempotency_key IS NOT NULL THEN
        -- Times in UTC and floats as numeric: the text must not follow the caller's TimeZone
        -- or extra_float_digits, or a repeat from another session would not match.
        t.request_hash := 'sql:' || md5(jsonb_build_array(
            name, queue, run_at AT TIME ZONE 'UTC', delay_seconds::numeric, t.target, payload,
            idempotency_key, priority, policy, timeout_seconds::numeric, parents,
            concurrency_key, labels, payload_ref)::text);
    END IF;
    RETURN t;
END $$;

-- One item of create_tasks_v1, a JSON object with the HTTP API's fields: each field's JSON type
-- checked as the API's strict model does, then sql_api_task.
CREATE FUNCTION sql_api_spec(prefix text, tenant text, max_bytes integer, seq integer, spec jsonb)
RETURNS task_input LANGUAGE plpgsql AS $$
DECLARE
    key text;
    run_at timestamptz;
    parents text[];
BEGIN
    IF jsonb_typeof(spec) IS DISTINCT FROM 'object' THEN
        PERFORM sql_api_fail(rtrim(prefix, '.'), 'must be an object');
    END IF;
    -- Unknown fields: what is left once the known ones are taken out (an expression, not a
    -- query: this runs for every item of a batch).
    IF spec - '{name, queue, run_at, delay_seconds, target, payload, idempotency_key, priority,
                retry, timeout_seconds, depends_on, concurrency_key, labels, payload_ref}'::text[]
       <> '{}' THEN
        FOR key IN SELECT jsonb_object_keys(spec) LOOP
            IF key NOT IN ('name', 'queue', 'run_at', 'delay_seconds', 'target', 'payload',
                           'idempotency_key', 'priority', 'retry', 'timeout_seconds',
                           'depends_on', 'concurrency_key', 'labels', 'payload_ref') THEN
                PERFORM sql_api_fail(prefix || key, 'unknown field');
            END IF;
        END LOOP;
    END IF;
    FOREACH key IN ARRAY ARRAY['name', 'idempotency_key', 'concurrency_key', 'payload_ref',
                               'queue'] LOOP
        IF jsonb_typeof(spec -> key) NOT IN ('string', 'null')
           OR (key = 'queue' AND jsonb_typeof(spec -> key) = 'null') THEN
            PERFORM sql_api_fail(prefix || key, 'must be a string');
        END IF;
    END LOOP;
    IF NOT spec ? 'target' THEN
        PERFORM sql_api_fail(prefix || 'target', 'required');
    END IF;
    IF jsonb_typeof(spec -> 'run_at') = 'string' THEN
        -- Backslash-free patterns: they read the same whatever standard_conforming_strings is.
        IF spec ->> 'run_at' !~ ('^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}'
                                 '([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$') THEN
            PERFORM sql_api_fail(prefix || 'run_at', 'must be an RFC 3339 date-time with an '
                                 'offset, e.g. 2026-12-01T15:00:00Z');
        END IF;
        BEGIN
            run_at := (spec ->> 'run_at')::timestamptz;
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            PERFORM sql_api_fail(prefix || 'run_at', 'not a valid date-time');
        END;
    ELSIF jsonb_typeof(spec -> 'run_at') <> 'null' THEN
        PERFORM sql_api_fail(prefix || 'run_at', 'must be an RFC 3339 date-time with an offset, '
                             'e.g. 2026-12-01T15:00:00Z');
    END IF;
    IF jsonb_typeof(spec -> 'depends_on') = 'array' THEN
        parents := ARRAY(SELECT CASE jsonb_typeof(d) WHEN 'string' THEN d #>> '{}' END
                         FROM jsonb_array_elements(spec -> 'depends_on') AS d);
    ELSIF spec ? 'depends_on' THEN
        PERFORM sql_api_fail(prefix || 'depends_on', 'must be a list of task ids');
    END IF;
    IF jsonb_typeof(spec -> 'delay_seconds') NOT IN ('number', 'null') THEN
        PERFORM sql_api_fail(prefix || 'delay_seconds', 'must be a number');
    END IF;
    IF jsonb_typeof(spec -> 'retry') NOT IN ('object', 'null') THEN
        PERFORM sql_api_fail(prefix || 'retry', 'must be an object');
    END IF;
    RETURN sql_api_task(
        prefix, tenant, max_bytes, seq,
        spec ->> 'name',
        coalesce(spec ->> 'queue', 'default'),
        run_at,
        CASE WHEN jsonb_typeof(spec -> 'delay_seconds') = 'number'
             THEN least((spec ->> 'delay_seconds')::numeric, 1e300)::float8 END,
        spec -> 'target',
        spec -> 'payload',
        spec ->> 'idempotency_key',
        CASE WHEN spec ? 'priority' THEN
            greatest(least(sql_api_number(spec -> 'priority', prefix || 'priority', true),
                           2147483647), -2147483648)::integer
        ELSE 0 END,
        nullif(spec -> 'retry', 'null'),
        CASE WHEN spec ? 'timeout_seconds' THEN
            least(sql_api_number(spec -> 'timeout_seconds', prefix || 'timeout_seconds'),
                  1e300)::float8
        ELSE 30 END,
        coalesce(parents, '{}'),
        spec ->> 'concurrency_key',
        coalesce(spec -> 'labels', '{}'),
        spec ->> 'payload_ref');
END $$;

-- The refusal of a login role granted no tenant.
CREATE FUNCTION sql_api_refuse_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'role % may not use the duetime SQL API', session_user
        USING ERRCODE = '42501', HINT = 'grant it a tenant: duetime tenant grant-sql TENANT ROLE';
END $$;

-- Tenant quotas as the HTTP API applies them (duetime.lifecycle.quotas and the store's
-- tenant_usage / tenant_creates_take): pending tasks from the maintained counters; the create
-- rate from the tenant's token bucket, locked until the caller's transaction ends.
CREATE FUNCTION sql_api_admit(tenant text, max_pending bigint, rate double precision, n integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    pending bigint;
    stored double precision;
    stored_at timestamptz;
    capacity double precision;
    tokens double precision;
    need double precision;
    moment timestamptz := statement_timestamp();
BEGIN
    IF max_pending IS NOT NULL THEN
        SELECT (SELECT coalesce(sum(c.n), 0) FROM task_counts c
                WHERE c.tenant_id = tenant
                  AND c.status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running'))
             + (SELECT coalesce(sum(d.delta), 0) FROM task_count_deltas d
                WHERE d.tenant_id = tenant
                  AND d.status IN ('scheduled', 'blocked', 'ready', 'retrying', 'running'))
        INTO pending;
        IF pending + n > max_pending THEN
            RAISE EXCEPTION 'tenant % has % task(s) not ended; % more would pass its '
                            'max_pending_tasks quota of %', quote_literal(tenant), pending, n,
                            max_pending
                USING ERRCODE = 'DT429', CONSTRAINT = 'max_pending_tasks',
                      HINT = 'retry after 1 second(s)';
        END IF;
    END IF;
    IF rate IS NOT NULL THEN
        SELECT max_creates_per_second, create_tokens, create_tokens_at
        INTO rate, stored, stored_at
        FROM tenants WHERE id = tenant FOR UPDATE;
        IF rate IS NULL THEN
            RETURN;
        END IF;
        capacity := greatest(rate, 1.0);
        tokens := capacity;
        IF stored IS NOT NULL AND stored_at IS NOT NULL THEN
            tokens := least(capacity, stored + rate * greatest(
                0.0, extract(epoch FROM moment - stored_at)::float8));
        END IF;
        need := least(n::float8, capacity);
        IF tokens < need THEN
            RAISE EXCEPTION 'tenant % is over its max_creates_per_second quota of %',
                            quote_literal(tenant), rate
                USING ERRCODE = 'DT429', CONSTRAINT = 'max_creates_per_second',
                      HINT = format('retry after %s second(s)', (need - tokens) / rate);
        END IF;
        UPDATE tenants SET create_tokens = tokens - n, create_tokens_at = moment WHERE id = tenant;
    END IF;
END $$;

-- Store checked tasks (all of :tenant, in order; idempotency keys distinct among them) as the
-- node's create does (duetime.store.postgres.hot, hot_batch.sql task_insert_rows): parents
-- (when :parents) locked and counted, an existing idempotency key a hit (for a :single create, a
-- Conflict when its fields differ), then one NOTIFY per channel, delivered at commit, on the
-- channels and with the payload the nodes listen for (duetime.store.postgres.signals). Returns
-- one result per task, in order.
CREATE FUNCTION sql_api_store(tenant text, fresh task_input[], single boolean, parents boolean)
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
            payload_ref)
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
            false, f.request_hash, f.payload_ref
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
    made := sql_api_store(tenant, ARRAY[task], true, cardinality(task.depends_on) > 0);
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    RETURN made[1];
END $$;

-- The API: up to 1,000 tasks all or nothing, a JSON array of objects with the HTTP API's task
-- fields (POST /v1/tasks/batch's "tasks"); one result per item, in order. A repeated
-- idempotency key in the batch answers the first item's task; an existing one, that task.
CREATE FUNCTION create_tasks_v1(tasks jsonb)
RETURNS SETOF task_created_v1 LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    tenant text;
    max_pending bigint;
    rate double precision;
    max_bytes integer;
    actor text := current_setting('duetime.actor', true);
    n integer;
    fresh task_input[] := '{}';
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
    made := sql_api_store(tenant, fresh, false, parents);
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

-- The API: cancel a task of the caller's tenant (DELETE /v1/tasks/{id}): a waiting task now
-- (failing its blocked dependents), a running one flagged to end cancelled with its attempt.
-- Returns the task's status after the call.
CREATE FUNCTION cancel_task_v1(task_id text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    tenant text;
    actor text := current_setting('duetime.actor', true);
    id_ uuid;
    ended text;
    dependents boolean;
    moment timestamptz := statement_timestamp();
BEGIN
    SELECT p.tenant_id INTO tenant FROM sql_producers p WHERE p.role_name = session_user;
    IF tenant IS NULL THEN
        PERFORM sql_api_refuse_role();
    END IF;
    PERFORM set_config('duetime.actor', 'sql:' || session_user, true);
    IF task_id ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' THEN
        id_ := task_id::uuid;
    END IF;
    UPDATE tasks t SET
        status = CASE WHEN t.status = 'running' THEN 'running' ELSE 'cancelled' END,
        cancel_requested = t.status = 'running',
        finished_at = CASE WHEN t.status = 'running' THEN NULL ELSE moment END,
        version = t.version + 1,
        updated_at = moment
    WHERE t.id = id_ AND t.tenant_id = tenant
      AND t.status IN ('scheduled', 'blocked', 'ready', 'running', 'retrying')
    RETURNING t.status, t.has_dependents INTO ended, dependents;
    IF ended IS NULL THEN
        SELECT t.status INTO ended FROM tasks t WHERE t.id = id_ AND t.tenant_id = tenant;
        IF ended IS NULL THEN
            RAISE EXCEPTION 'no task %', task_id USING ERRCODE = 'P0002', COLUMN = 'task_id';
        END IF;
        RAISE EXCEPTION 'cannot cancel task %: it is %', task_id, ended
            USING ERRCODE = '55000', COLUMN = 'task_id';
    END IF;
    IF ended = 'cancelled' AND dependents THEN
        -- As task_deps_fail (dependencies.sql): every blocked descendant fails.
        WITH RECURSIVE doomed (id) AS (
            SELECT d.child_id FROM task_deps d
            JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
            WHERE d.parent_id = id_
          UNION
            SELECT d.child_id FROM doomed
            JOIN task_deps d ON d.parent_id = doomed.id
            JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
        )
        UPDATE tasks t SET
            status = 'failed',
            last_error = 'a task it depends on failed or was cancelled',
            finished_at = moment,
            version = t.version + 1,
            updated_at = moment
        WHERE t.id IN (SELECT id FROM doomed) AND t.status = 'blocked';
    END IF;
    PERFORM set_config('duetime.actor', coalesce(actor, ''), true);
    RETURN ended;
END $$;

-- `duetime tenant grant-sql TENANT ROLE`: the login role ROLE creates for TENANT through the API
-- functions and may do nothing else here (USAGE on this schema, EXECUTE on the four functions,
-- no table privilege). Run by the store's own role, which owns every object.
CREATE FUNCTION sql_api_grant(role_name text, tenant text) RETURNS void LANGUAGE plpgsql AS $$
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
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('create_task_v1', 'create_tasks_v1', 'cancel_task_v1', 'api_version')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, role_name);
    END LOOP;
    INSERT INTO sql_producers (role_name, tenant_id) VALUES (role_name, tenant)
    ON CONFLICT ON CONSTRAINT sql_producers_pkey
    DO UPDATE SET tenant_id = EXCLUDED.tenant_id, granted_at = now();
END $$;

-- The grant undone (`duetime tenant revoke-sql ROLE`); true when the role had one.
CREATE FUNCTION sql_api_revoke(role_name text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    fn regprocedure;
    had boolean;
BEGIN
    DELETE FROM sql_producers p WHERE p.role_name = sql_api_revoke.role_name;
    had := FOUND;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        FOR fn IN
            SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace
              AND p.proname IN ('create_task_v1', 'create_tasks_v1', 'cancel_task_v1',
                                'api_version')
        LOOP
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %I', fn, role_name);
        END LOOP;
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM %I', current_schema(), role_name);
    END IF;
    RETURN had;
END $$;

-- A fixed search path on the API's functions (named by this schema, whatever it
-- is), and none of this migration's functions executable by PUBLIC: grant-sql grants the four
-- API functions to a producer's role.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('create_task_v1', 'create_tasks_v1', 'cancel_task_v1')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    END LOOP;
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND (p.proname LIKE 'sql\_api\_%' OR p.proname IN (
                   'create_task_v1', 'create_tasks_v1', 'cancel_task_v1', 'api_version'))
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END $$;
