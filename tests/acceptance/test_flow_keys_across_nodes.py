"""Keyed flow control with real nodes (SPEC §7 "Keyed flow control"): two nodes sharing one
PostgreSQL store, and one SQLite node. 50 creators racing one unique key across both nodes make
exactly one task and each is told which; a keyed rate limit holds for every key on both nodes
while the keys run side by side and a hot key's backlog starves nobody; a burst of creates for
one debounced key runs once, with the last payload. Starts are measured where they happen, at
a loopback receiver (:mod:`duetime.bench.receiver`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime.bench import flow_measures as fm
from duetime.bench.flow_scenarios import (
    ADMIN_TOKEN,
    bearer,
    create_tasks,
    new_tenant,
    put_queue,
    records_of,
    wait_queue_done,
)
from duetime.bench.harness import NodeOptions, Proc, start_node, start_receiver, wait_until
from duetime.bench.runs import sql_value

pytestmark = pytest.mark.acceptance

ENV = {
    "DUETIME_ADMIN_TOKEN": ADMIN_TOKEN,
    "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
    "DUETIME_DISPATCH_PROCESSES": "1",
    "DUETIME_DISPATCH_CONCURRENCY": "32",
}
PG_ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@contextlib.contextmanager
def _pg_nodes(pg_template: str, workdir: Path) -> Iterator[tuple[list[Proc], Proc]]:
    """Two nodes on a fresh PostgreSQL database (from the migrated template), and a receiver."""
    name = f"duetime_t_keys_{uuid.uuid4().hex[:8]}"
    sql_value(PG_ADMIN_URL, f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    db = f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    started: list[Proc] = []
    try:
        started.append(start_receiver(workdir))
        with ThreadPoolExecutor(2) as pool:
            starting = [
                pool.submit(start_node, workdir, NodeOptions(db=db, env=ENV), f"node{i}")
                for i in (1, 2)
            ]
            started += [f.result() for f in starting]
        yield started[1:], started[0]
    finally:
        for proc in started:
            proc.stop(5)
        sql_value(PG_ADMIN_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_cluster(
    pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Proc], Proc]]:
    with _pg_nodes(pg_template, tmp_path_factory.mktemp("keys")) as made:
        yield made


@pytest.fixture(scope="module")
def sqlite_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Proc], Proc]]:
    workdir = tmp_path_factory.mktemp("keys-sqlite")
    receiver = start_receiver(workdir)
    node = None
    try:
        node = start_node(workdir, NodeOptions(db=f"sqlite:///{workdir}/keys.db", env=ENV))
        yield [node], receiver
    finally:
        for proc in (node, receiver):
            if proc is not None:
                proc.stop(5)


@pytest.fixture(params=["postgres", "sqlite"])
def nodes(
    request: pytest.FixtureRequest,
) -> tuple[list[Proc], Proc, dict[str, str]]:
    """The nodes of one store (two on PostgreSQL, one on SQLite), its receiver, and a new
    tenant's auth headers."""
    found: tuple[list[Proc], Proc] = request.getfixturevalue(
        "pg_cluster" if request.param == "postgres" else "sqlite_node"
    )
    procs, receiver = found
    auth = bearer(new_tenant(procs[0].url, f"t-{uuid.uuid4().hex[:8]}"))
    return procs, receiver, auth


async def _race(
    urls: Sequence[str], body: dict[str, Any], auth: dict[str, str], n: int
) -> list[httpx.Response]:
    async with httpx.AsyncClient(headers=auth, timeout=30) as client:
        return await asyncio.gather(
            *(client.post(f"{urls[i % len(urls)]}/v1/tasks", json=body) for i in range(n))
        )


def test_racing_creators_of_one_unique_key_make_one_task(
    nodes: tuple[list[Proc], Proc, dict[str, str]],
) -> None:
    procs, _, auth = nodes
    put_queue(procs[0].url, "orders", {"unique": {"key": "payload.order", "period": "PT1H"}}, auth)
    time.sleep(1.1)  # every node reads the queue's rules again (at most a second old)
    body = {"target": {"type": "worker"}, "queue": "orders", "payload": {"order": 7}}
    answers = asyncio.run(_race([p.url for p in procs], body, auth, 50))
    told = Counter((r.status_code, r.headers.get("duetime-unique")) for r in answers)
    assert told == {(201, "created"): 1, (200, "existing"): 49}, told
    assert len({r.json()["id"] for r in answers}) == 1
    listed = httpx.get(f"{procs[-1].url}/v1/tasks", params={"queue": "orders"}, headers=auth)
    assert len(listed.json()["items"]) == 1


def test_keyed_rate_limit_holds_per_key_and_starves_no_key(
    nodes: tuple[list[Proc], Proc, dict[str, str]],
) -> None:
    procs, receiver, auth = nodes
    rate, keys, per_key, hot = 4.0, 12, 5, 16
    rules = {"key_limit": {"key": "payload.customer", "rate": f"{rate:g}/s", "burst": 1}}
    put_queue(procs[0].url, "keyed", rules, auth)
    time.sleep(1.1)
    target = {"type": "http", "url": f"{receiver.url}/hook"}
    bodies = [
        {"target": target, "queue": "keyed", "payload": {"customer": f"c{k}"}}
        for _ in range(per_key)
        for k in range(keys)
    ] + [{"target": target, "queue": "keyed", "payload": {"customer": "hot"}}] * hot
    began = time.time()
    ids = asyncio.run(create_tasks(procs[-1].url, bodies, auth))
    wait_queue_done(procs[0].url, "keyed", len(ids), timeout=60, headers=auth)

    key_of = {i: str(b["payload"]["customer"]) for i, b in zip(ids, bodies, strict=True)}
    starts: dict[str, list[float]] = defaultdict(list)
    for task_id, record in fm.first_records(records_of(receiver.url, ids)).items():
        starts[key_of[task_id]].append(float(record["at"]))
    assert sum(map(len, starts.values())) == len(ids)
    for key, times in starts.items():
        # One bucket per key for both nodes: never more than burst + rate x the window (a
        # token of slack covers the time between a claim and its arrival here).
        assert fm.bucket_excess(times, rate, 1) <= 1, (key, sorted(t - began for t in times))
    # The keys run side by side: every key has started within two seconds of the first
    # arrival (a claim that walked the hot key's backlog key by key would not reach them) and
    # each ran its tasks at about its rate.
    first = min(min(t) for t in starts.values())
    assert all(min(t) - first < 2.0 for t in starts.values()), "a key waited behind another"
    hot_span = max(starts["hot"]) - min(starts["hot"])
    assert (hot - 1) / hot_span >= 0.7 * rate, f"the hot key ran {hot} tasks in {hot_span:.1f} s"
    everyone = max(max(t) for t in starts.values()) - first
    assert everyone < (hot - 1) / rate + 3.0, f"the whole run took {everyone:.1f} s"
    shown = httpx.get(f"{procs[0].url}/v1/queues/keyed", headers=auth).json()
    assert shown["key_limit"]["rate"] == "4/s" and shown["counts"]["succeeded"] == len(ids)


def test_a_debounced_burst_runs_once_with_the_last_payload(
    nodes: tuple[list[Proc], Proc, dict[str, str]],
) -> None:
    procs, receiver, auth = nodes
    rules = {"debounce": {"key": "labels.user", "period": "PT2S", "max_wait": "PT1M"}}
    put_queue(procs[0].url, "burst", rules, auth)
    time.sleep(1.1)
    target = {"type": "http", "url": f"{receiver.url}/hook"}
    seen: set[str] = set()
    with httpx.Client(headers=auth, timeout=30) as client:
        for n in range(200):  # one after another, alternating nodes: the last is the last
            body = {"target": target, "queue": "burst", "labels": {"user": "u"}, "payload": n}
            answer = client.post(f"{procs[n % len(procs)].url}/v1/tasks", json=body)
            assert answer.status_code in (200, 201), answer.text
            seen.add(answer.json()["id"])
    assert len(seen) == 1, "every create of the burst was folded into one task"
    (task_id,) = seen
    wait_until(lambda: records_of(receiver.url, [task_id]), 30, "the debounced task to run")
    time.sleep(1.0)  # nothing else of the burst may follow
    assert len(records_of(receiver.url, [task_id])) == 1
    task = httpx.get(f"{procs[0].url}/v1/tasks/{task_id}", headers=auth).json()
    assert (task["payload"], task["absorbed"], task["status"]) == (199, 199, "succeeded")
    listed = httpx.get(f"{procs[0].url}/v1/tasks", params={"queue": "burst"}, headers=auth)
    assert len(listed.json()["items"]) == 1
