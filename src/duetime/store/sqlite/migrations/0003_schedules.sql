-- Recurring schedules (SPEC §3 "Schedules"), mirroring the PostgreSQL schema column for column
-- (timestamps as INTEGER microseconds, JSON as text, booleans as 0/1; see 0001_init.sql).

CREATE TABLE schedules (
    id                      TEXT    NOT NULL PRIMARY KEY,
    tenant_id               TEXT    NOT NULL,
    cron                    TEXT,
    every                   TEXT,
    rrule                   TEXT,
    timezone                TEXT    NOT NULL,
    start_at                INTEGER,
    end_at                  INTEGER,
    jitter_seconds          INTEGER NOT NULL,
    dst_nonexistent         TEXT    NOT NULL,
    dst_ambiguous           TEXT    NOT NULL,
    task                    TEXT    NOT NULL,
    overlap                 TEXT    NOT NULL CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    catchup                 TEXT    NOT NULL CHECK (catchup IN ('none', 'latest', 'all')),
    catchup_window_seconds  INTEGER NOT NULL,
    catchup_max_runs        INTEGER NOT NULL,
    anchor_at               INTEGER NOT NULL,
    paused                  INTEGER NOT NULL DEFAULT 0,
    pause_note              TEXT,
    paused_at               INTEGER,
    resumed_at              INTEGER,
    resume_catchup          TEXT,
    next_run_at             INTEGER,
    materialized_until      INTEGER NOT NULL,
    buffered_at             INTEGER,
    last_task_id            TEXT,
    version                 INTEGER NOT NULL DEFAULT 1,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    deleted                 INTEGER NOT NULL DEFAULT 0,
    CHECK ((cron IS NOT NULL) + (every IS NOT NULL) + (rrule IS NOT NULL) = 1)
) STRICT;

CREATE INDEX schedules_tenant ON schedules (tenant_id, id DESC) WHERE deleted = 0;
-- Materializer (queries must repeat these WHERE texts exactly for SQLite to use them).
CREATE INDEX schedules_due_ahead ON schedules (next_run_at)
    WHERE paused = 0 AND deleted = 0 AND overlap = 'allow';
CREATE INDEX schedules_due_now ON schedules (next_run_at)
    WHERE paused = 0 AND deleted = 0 AND overlap <> 'allow';
CREATE INDEX schedules_buffered ON schedules (buffered_at)
    WHERE buffered_at IS NOT NULL AND paused = 0 AND deleted = 0;

-- One task per occurrence; it also serves every lookup the plain index of 0001 served.
DROP INDEX IF EXISTS tasks_schedule;
CREATE UNIQUE INDEX tasks_schedule_occurrence ON tasks (schedule_id, scheduled_for)
    WHERE schedule_id IS NOT NULL;

CREATE TABLE schedule_ticks (
    schedule_id  TEXT    NOT NULL,
    nominal      INTEGER NOT NULL,
    outcome      TEXT    NOT NULL,
    task_id      TEXT,
    detail       TEXT,
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, nominal, outcome)
) STRICT, WITHOUT ROWID;

CREATE TABLE schedule_revisions (
    id           INTEGER NOT NULL PRIMARY KEY,
    schedule_id  TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    actor        TEXT,
    action       TEXT    NOT NULL,
    before       TEXT    NOT NULL,
    after        TEXT    NOT NULL
) STRICT;
CREATE INDEX schedule_revisions_schedule ON schedule_revisions (schedule_id, id DESC);
