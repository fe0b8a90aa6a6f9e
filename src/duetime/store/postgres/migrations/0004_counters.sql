-- Task counts by (tenant, queue, status), kept with every change to tasks, so queue figures and
-- /metrics never count the task table.
--
-- Statement-level triggers read the statement's transition tables (every row it inserted,
-- updated or deleted), aggregate them, and INSERT one delta row per (tenant, queue, status) the
-- statement changed: a batch of 5,000 completions adds a handful of rows, and concurrent
-- statements never update the same row (no hot-row contention on the batch paths). The
-- leader folds deltas into task_counts in bounded rounds; readers add what is not yet folded
-- (task_counts + sum(task_count_deltas)), so figures are exact at any time.

CREATE TABLE task_counts (
    tenant_id  text NOT NULL,
    queue      text NOT NULL,
    status     text NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (tenant_id, queue, status)
);

-- Insert-only between folds; no index (readers and the fold read it whole, and it stays small).
CREATE TABLE task_count_deltas (
    tenant_id  text NOT NULL,
    queue      text NOT NULL,
    status     text NOT NULL,
    delta      bigint NOT NULL
);

CREATE FUNCTION task_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_count_deltas (tenant_id, queue, status, delta)
    SELECT tenant_id, queue, status, count(*) FROM counted_new GROUP BY 1, 2, 3;
    RETURN NULL;
END $$;

CREATE FUNCTION task_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_count_deltas (tenant_id, queue, status, delta)
    SELECT tenant_id, queue, status, -count(*) FROM counted_old GROUP BY 1, 2, 3;
    RETURN NULL;
END $$;

-- Updates that leave (tenant, queue, status) alone (heartbeats, labels) net to zero: no row.
CREATE FUNCTION task_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_count_deltas (tenant_id, queue, status, delta)
    SELECT tenant_id, queue, status, sum(d)
    FROM (SELECT tenant_id, queue, status, -1 AS d FROM counted_old
          UNION ALL
          SELECT tenant_id, queue, status, 1 FROM counted_new) AS changed
    GROUP BY 1, 2, 3
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;

CREATE FUNCTION task_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM task_count_deltas;
    DELETE FROM task_counts;
    RETURN NULL;
END $$;

-- Creating the triggers locks tasks against writes until this migration commits, so the
-- starting counts below cannot miss a concurrent change.
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS counted_new
    FOR EACH STATEMENT EXECUTE FUNCTION task_counts_inserted();
CREATE TRIGGER task_counts_update AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS counted_old NEW TABLE AS counted_new
    FOR EACH STATEMENT EXECUTE FUNCTION task_counts_updated();
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks
    REFERENCING OLD TABLE AS counted_old
    FOR EACH STATEMENT EXECUTE FUNCTION task_counts_deleted();
CREATE TRIGGER task_counts_truncate AFTER TRUNCATE ON tasks
    FOR EACH STATEMENT EXECUTE FUNCTION task_counts_truncated();

INSERT INTO task_counts (tenant_id, queue, status, n)
SELECT tenant_id, queue, status, count(*) FROM tasks GROUP BY 1, 2, 3;
