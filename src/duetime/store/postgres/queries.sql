-- Named queries of the PostgreSQL store, loaded into a dict by duetime.store.postgres.sql.
--
-- Conventions:
--   * Statements are prepared and soon run with generic plans, blind to array sizes: rows are
--     found with "id = ANY(array)" (an index scan at any table size), never by joining a CTE or
--     unnest() to tasks, which a generic plan may turn into a hash join over a sequential scan.
--   * $1 is the pinned test time in every query that needs "now": every due/lease decision reads
--     coalesce($1::timestamptz, now()) so production trusts the database clock and tests pin it.
--   * Every state change is one UPDATE conditional on status (and lease_id for running tasks).
--   * No statement sends NOTIFY: a NOTIFY in a transaction holds a cluster-wide lock through
--     its commit, which serialized concurrent single creates (measured: 2-4x fewer per second).
--     The store wakes other nodes after commit instead, with one coalesced pg_notify
--     (see duetime.store.postgres.signals).

-- name: ping
SELECT 1;

-- name: now
SELECT coalesce($1::timestamptz, now());

-- name: notify
SELECT pg_notify($1, $2);

-- name: task_deps_fail
-- Parents $2 failed or were cancelled: every blocked descendant fails (transitively).
WITH RECURSIVE doomed(id) AS (
    SELECT d.child_id FROM task_deps d
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
    WHERE d.parent_id = ANY($2::uuid[])
  UNION
    SELECT d.child_id FROM doomed
    JOIN task_deps d ON d.parent_id = doomed.id
    JOIN tasks c ON c.id = d.child_id AND c.status = 'blocked'
)
UPDATE tasks t SET
    status = 'failed',
    last_error = 'a task it depends on failed or was cancelled',
    finished_at = coalesce($1::timestamptz, now()),
    version = t.version + 1,
    updated_at = coalesce($1::timestamptz, now())
WHERE t.id IN (SELECT id FROM doomed) AND t.status = 'blocked';
