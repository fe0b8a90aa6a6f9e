-- Named queries of the PostgreSQL store outside the core's plans, loaded by
-- duetime.store.postgres.sql with the one loader (duetime.store.sql).
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
SELECT coalesce(:now::timestamptz, now());

-- name: notify
SELECT pg_notify(:channel, :payload);

