"""``task_claim_keyed`` (PostgreSQL) claims exactly what a plain ranking of the queue claims.

The plain statement ranks every ready task of the queue with a window function (O(backlog) per
claim); the store's walks the queue's ready tasks in claim order and stops when the room is
filled (``tests/store/test_keyed_claim_scale.py`` pins that). The plain text is kept below,
verbatim, as the oracle: on random small states (keyed and unkeyed tasks, ties in priority, due
and creation time, running tasks holding keys, other queues and tenants, random ``per_key``,
room, target types and names), both run on the same rows, each rolled back, and must claim the
same set of task ids. The store's statement is also run with its shortcuts turned off (every
key's first tasks read per row, as in a queue with more keys than it lists up front), so each of
its paths is held to the oracle.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from duetime.store.postgres import hot
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sql import Query, parse

# The oracle: the keyed claim written as a window over every ready task of the queue, with the
# two fragments it includes.
ORACLE_SQL = """
-- fragment: limited_room
-- How many a limited queue's claim may take: :limit (the claim's room, already cut to the
-- bucket's whole tokens), and below max_concurrency less those running (NULL: no cap).
room AS (
    SELECT greatest(0, least(:limit::int, coalesce(:max_concurrency::int - (
        SELECT count(*) FROM tasks
        WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue), :limit::int)))::int
        AS n
)

-- fragment: claim_lease
-- Every claim: lease the rows its "picked" CTE chose (FOR UPDATE SKIP LOCKED, so claimers on
-- many nodes never collide; the status test guards the keyed claim, which cannot lock in its
-- window). :lease_seconds NULL = the task's own timeout + :grace_seconds.
UPDATE tasks t SET
    status = 'running',
    version = t.version + 1,
    attempts = t.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = coalesce(:now::timestamptz, now())
        + make_interval(secs => coalesce(:lease_seconds::float8,
                                         t.timeout_seconds + :grace_seconds::float8)),
    worker_id = :worker_id,
    started_at = coalesce(:now::timestamptz, now()),
    finished_at = NULL,
    updated_at = coalesce(:now::timestamptz, now())
WHERE t.id = ANY(ARRAY(SELECT id FROM picked)) AND t.status = 'ready'
RETURNING t.*;

-- name: task_claim_keyed
-- A queue with max_concurrency_per_key (any target types): a task whose concurrency_key already
-- has :per_key running, or earlier ready ones filling the rest, waits; tasks without a key are
-- not bound. Each key's tasks go in priority, due, creation order, so with 1 they run serially.
-- Reads every ready task of the queue (the window needs them all); the queue lock serializes
-- claimers, so no row can be taken twice, and claim_lease re-tests the status.
WITH
-- include: limited_room
, busy AS (
    SELECT concurrency_key, count(*)::int AS n FROM tasks
    WHERE tenant_id = :tenant_id AND status = 'running' AND queue = :queue
      AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
ranked AS (
    SELECT id, priority, due_at, created_at, concurrency_key,
           target_type = ANY(:types::text[])
               AND (:names::text[] IS NULL OR name = ANY(:names::text[])) AS wanted,
           row_number() OVER (PARTITION BY concurrency_key
                              ORDER BY priority DESC, due_at, created_at, id) AS rank
    FROM tasks
    WHERE status = 'ready' AND tenant_id = :tenant_id AND queue = :queue
),
picked AS (
    SELECT r.id FROM ranked r LEFT JOIN busy b ON b.concurrency_key = r.concurrency_key
    WHERE r.wanted AND (r.concurrency_key IS NULL OR coalesce(b.n, 0) + r.rank <= :per_key::int)
    ORDER BY r.priority DESC, r.due_at, r.created_at, r.id
    LIMIT (SELECT n FROM room)
)
-- include: claim_lease
"""

ORACLE = parse(ORACLE_SQL, "postgres", source="oracle")["task_claim_keyed"]
STORE_CLAIM = hot.Q["task_claim_keyed"]


def _replaced(text: str, old: str, new: str, count: int) -> str:
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times, not {count}"
    return text.replace(old, new)


def _without_shortcuts() -> list[Query]:
    """The store's statement with its shortcuts off: (1) no list of every key (as when the queue
    holds more than the statement lists up front), (2) that and no keys read ahead from the first
    rows either, so every keyed row asks for its key's first tasks itself."""
    text = STORE_CLAIM.text
    no_list = _replaced(text, "cardinality(ks) <= 32", "cardinality(ks) <= 0", 1)
    start, end = no_list.index("lead AS MATERIALIZED ("), no_list.index("worker_walk AS")
    lead = _replaced(no_list[start:end], "LIMIT (SELECT n FROM room)", "LIMIT 0", 2)
    no_lead = no_list[:start] + lead + no_list[end:]
    return [Query(STORE_CLAIM.name, t, STORE_CLAIM.names) for t in (no_list, no_lead)]


BASE = datetime(2026, 1, 1, tzinfo=UTC)

_TASK = st.fixed_dictionaries(
    {
        "tenant": st.sampled_from(["acme"] * 9 + ["beta"]),
        "queue": st.sampled_from(["q"] * 9 + ["other"]),
        "status": st.sampled_from(["ready"] * 7 + ["running"] * 2 + ["scheduled", "succeeded"]),
        "key": st.sampled_from([None, None, None, "a", "a", "a", "a", "b", "b", "c", ""]),
        # Few values, so ties in priority and due time (broken by creation, then id) are common.
        "priority": st.sampled_from([0, 0, 0, 1, -1]),
        "due": st.integers(0, 2),
        "created": st.integers(0, 2),
        "type": st.sampled_from(["worker", "http"]),
        "name": st.sampled_from(["x", "y"]),
        "id": st.uuids(),
    }
)

_CLAIM = st.fixed_dictionaries(
    {
        "types": st.sampled_from([["worker"], ["http"], ["http", "worker"]]),
        "names": st.one_of(st.none(), st.just(["x"]), st.just(["x", "y"])),
        "limit": st.integers(0, 6),
        "max_concurrency": st.one_of(st.none(), st.integers(0, 10)),
        "per_key": st.integers(1, 3),
        "generic": st.booleans(),
    }
)

_INSERT = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, priority,
                   retry, timeout_seconds, concurrency_key, run_at, due_at, created_at, updated_at,
                   attempts, lease_id, lease_expires_at, started_at)
SELECT id, tenant_id, name, queue, status, target_type, '{"type": "worker"}', '{}', priority,
       '{}', 30, concurrency_key, due_at, due_at, created_at, created_at,
       CASE WHEN status = 'running' THEN 1 ELSE 0 END,
       CASE WHEN status = 'running' THEN gen_random_uuid() END,
       CASE WHEN status = 'running' THEN $10::timestamptz + interval '1 minute' END,
       CASE WHEN status = 'running' THEN created_at END
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
            $8::text[], $9::timestamptz[], $11::timestamptz[])
     AS x (id, tenant_id, name, queue, status, target_type, priority, concurrency_key, due_at,
           created_at)
"""


async def _claim(
    conn: asyncpg.Connection[Any], query: Query, params: dict[str, Any], *settings: str
) -> set[uuid.UUID]:
    await conn.execute("SAVEPOINT claim")
    try:
        for setting in settings:
            await conn.execute(setting)
        rows = await conn.fetch(query.text, *(params[n] for n in query.names))
    finally:
        await conn.execute("ROLLBACK TO SAVEPOINT claim")
    return {r["id"] for r in rows}


async def _compare(
    conn: asyncpg.Connection[Any], tasks: list[dict[str, Any]], claim: dict[str, Any]
) -> set[uuid.UUID]:
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute(
            _INSERT,
            [t["id"] for t in tasks],
            [t["tenant"] for t in tasks],
            [t["name"] for t in tasks],
            [t["queue"] for t in tasks],
            [t["status"] for t in tasks],
            [t["type"] for t in tasks],
            [t["priority"] for t in tasks],
            [t["key"] for t in tasks],
            [BASE + timedelta(seconds=t["due"]) for t in tasks],
            BASE,
            [BASE + timedelta(seconds=t["created"]) for t in tasks],
        )
        # The statement as the store runs it (no sorts, generic plan), or with custom plans.
        mode = "force_generic_plan" if claim["generic"] else "force_custom_plan"
        settings = (hot.Q["claim_keyed_plan"].text, f"SET LOCAL plan_cache_mode = {mode}")
        params = {
            "now": BASE,
            "types": claim["types"],
            "queue": "q",
            "names": claim["names"],
            "limit": claim["limit"],
            "lease_seconds": None,
            "grace_seconds": 10.0,
            "worker_id": "w",
            "tenant_id": "acme",
            "max_concurrency": claim["max_concurrency"],
            "per_key": claim["per_key"],
        }
        expected = await _claim(conn, ORACLE, params)
        for query in (STORE_CLAIM, *_without_shortcuts()):
            got = await _claim(conn, query, params, *settings)
            assert got == expected, (query.text == STORE_CLAIM.text, tasks, claim)
        return expected
    finally:
        await tx.rollback()


def _task(key: str | None, created: int, id: int, **more: Any) -> dict[str, Any]:
    base = {"tenant": "acme", "queue": "q", "status": "ready", "priority": 0, "due": 0}
    base |= {"type": "worker", "name": "x"}
    return base | {"key": key, "created": created, "id": uuid.UUID(int=id)} | more


# Key "a" has two ready tasks at the same priority and due time: the one created first goes
# first though its id is larger; "b" has one running, so its ready one waits.
_TIED = [
    _task("a", created=1, id=2),
    _task("a", created=2, id=1),
    _task("b", created=0, id=3),
    _task("b", created=0, id=4, status="running"),
    _task(None, created=0, id=5, priority=-1),
]
_ONE_EACH = {
    "types": ["worker"],
    "names": None,
    "limit": 5,
    "max_concurrency": None,
    "per_key": 1,
    "generic": False,
}
# Two tasks at the same priority and due time, inserted (so walked) in id order, for a room of
# one: the one created first must win, of worker and of push tasks.
_TIED_PAIR = [_task(None, created=2, id=1), _task(None, created=1, id=2)]
_TIED_PUSH = [t | {"type": "http"} for t in _TIED_PAIR]
_ONE = _ONE_EACH | {"limit": 1}


def test_the_keyed_claim_takes_what_the_window_statement_took(pg_url: str) -> None:
    loop = asyncio.new_event_loop()
    # As the store connects (no JIT: with the sorts off, the planner's costs would compile it).
    server = {"jit": "off", "statement_timeout": "10s"}
    conn: asyncpg.Connection[Any] = loop.run_until_complete(
        pg_connect(pg_url, server_settings=server)
    )
    claimed: list[int] = []

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @example(tasks=_TIED, claim=_ONE_EACH)  # a key's order within one priority and due time
    @example(tasks=_TIED_PAIR, claim=_ONE)
    @example(tasks=_TIED_PUSH, claim=_ONE | {"types": ["http"]})
    @given(
        tasks=st.lists(_TASK, min_size=8, max_size=30, unique_by=lambda t: t["id"]),
        claim=_CLAIM,
    )
    def check(tasks: list[dict[str, Any]], claim: dict[str, Any]) -> None:
        claimed.append(len(loop.run_until_complete(_compare(conn, tasks, claim))))

    try:
        check()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()
    assert len(claimed) >= 100
    assert sum(1 for n in claimed if n > 0) >= 10, claimed  # the draws did claim something
