-- Recurring schedules (SPEC §3 "Schedules"): the schedules themselves, the tick ledger, the
-- revision history, and the index that makes one task per occurrence a database fact.

CREATE TABLE schedules (
    id                      text PRIMARY KEY,
    tenant_id               text NOT NULL,
    cron                    text,
    every                   text,
    rrule                   text,
    timezone                text NOT NULL,
    start_at                timestamptz,
    end_at                  timestamptz,
    jitter_seconds          integer NOT NULL,
    dst_nonexistent         text NOT NULL,
    dst_ambiguous           text NOT NULL,
    task                    jsonb NOT NULL,
    overlap                 text NOT NULL CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    catchup                 text NOT NULL CHECK (catchup IN ('none', 'latest', 'all')),
    catchup_window_seconds  integer NOT NULL,
    catchup_max_runs        integer NOT NULL,
    anchor_at               timestamptz NOT NULL,
    paused                  boolean NOT NULL DEFAULT false,
    pause_note              text,
    paused_at               timestamptz,
    resumed_at              timestamptz,
    resume_catchup          text,
    -- The materializer's key: no unhandled occurrence comes before it (NULL: ended).
    next_run_at             timestamptz,
    -- The durable horizon cursor: every occurrence at or before it has been handled.
    materialized_until      timestamptz NOT NULL,
    buffered_at             timestamptz,
    last_task_id            uuid,
    version                 bigint NOT NULL DEFAULT 1,
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL,
    deleted                 boolean NOT NULL DEFAULT false,
    CONSTRAINT schedules_one_expression CHECK (num_nonnulls(cron, every, rrule) = 1)
);

-- Listing, newest first.
CREATE INDEX schedules_tenant_idx ON schedules (tenant_id, id DESC) WHERE NOT deleted;
-- Materializer: a round reads only schedules with an occurrence due within its horizon, so its
-- cost grows with the occurrences due, not with the schedules stored. overlap=allow schedules
-- are made ahead of time; the others only once due (their overlap check needs the present).
CREATE INDEX schedules_due_ahead_idx ON schedules (next_run_at)
    WHERE NOT paused AND NOT deleted AND overlap = 'allow';
CREATE INDEX schedules_due_now_idx ON schedules (next_run_at)
    WHERE NOT paused AND NOT deleted AND overlap <> 'allow';
CREATE INDEX schedules_buffered_idx ON schedules (buffered_at)
    WHERE buffered_at IS NOT NULL AND NOT paused AND NOT deleted;

-- One task per occurrence: no race, retry or fail-over can make a second one.
CREATE UNIQUE INDEX tasks_schedule_occurrence_idx ON tasks (schedule_id, scheduled_for)
    WHERE schedule_id IS NOT NULL;

-- The tick ledger: every nominal instant and what became of it.
CREATE TABLE schedule_ticks (
    schedule_id  text NOT NULL,
    nominal      timestamptz NOT NULL,
    outcome      text NOT NULL,
    task_id      uuid,
    detail       text,
    recorded_at  timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, nominal, outcome)
);

CREATE TABLE schedule_revisions (
    id           bigserial PRIMARY KEY,
    schedule_id  text NOT NULL,
    at           timestamptz NOT NULL,
    actor        text,
    action       text NOT NULL,
    before       jsonb NOT NULL,
    after        jsonb NOT NULL
);
CREATE INDEX schedule_revisions_schedule_idx ON schedule_revisions (schedule_id, id DESC);
