"""The hot path while an archive round runs (SPEC §6 "history" and §8): the standard
``burst-http`` scenario of ``duetime bench`` (20,000 ``http`` tasks due at one instant, one node
at its defaults, a local receiver) on a store that holds a month of history due for export, with
no archive running ("idle") and with the engine's archive round running ("archiving"),
interleaved, ``--repeat`` times each; then the medians and their ratio::

    .venv/bin/python benchmarks/history_archive_burst.py [--month-rows 3000000] [--repeat 3]
        [--tasks 20000] [--solo-rounds 1] [--round-in process|node] [--round-nice 0]

The month (``--month-rows`` attempt records, the month that ended more than ``hot_days`` before
today) is generated once in a template database, as its partition of ``history``
(``history_bench.month_build``), and vacuumed; every run gets a fresh copy of it
(``CREATE DATABASE ... TEMPLATE``), so idle and archiving runs start from the same store.

The round is ``HistoryMaintenance.run_once()`` — what the leader runs each interval: retention
(nothing is due here), then the month exported to zstd Parquet in keyset pages, verified, sealed
and its partition detached and dropped. ``--round-in node`` (the default) gives the burst's node
an archive (``DUETIME_ARCHIVE_URL``) and a 2 s history interval (idle runs: the same interval,
no archive), so its leader exports the month itself, in the process that serves the API and
claims, as a deployment does: its batches wait while the node's dispatcher is busy.
``--round-in process`` runs the round in a process of its own against the run's database,
started just before the burst's node, where it knows nothing of the hot path (a round that
never yields to it, for comparison). Either way the round runs across the whole burst
(checked: it has begun writing the month's files at the burst's due instant and has not sealed
the month at its last delivery). Each run reports where the machine's CPU went
between the burst's due instant and its last delivery (``/proc``: the node and its dispatcher
processes, PostgreSQL, the receiver, the round's process and its PostgreSQL backend).
``--solo-rounds`` rounds then run alone on a copy, for the round's own duration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from history_bench import month_build

import duetime.bench.scenarios as scenarios
from duetime.bench.runs import BenchConfig, cpu_speed, machine, sql_value
from duetime.clock import SystemClock
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history.archive import Archive
from duetime.history.partitions import month_of, months_ahead
from duetime.history.retention import default_policy
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect

PREFIX = "duetime_hist_burst"
TENANT = "default"  # the tenant of a node without an admin token (the burst's)
TICK = os.sysconf("SC_CLK_TCK")


def due_month() -> date:
    """A month that ended more than ``hot_days`` (30) ago: the next round exports it."""
    return month_of(datetime.now(UTC) - timedelta(days=70))


# -- the template ---------------------------------------------------------------------------


async def prepare(url: str, month: date, rows: int) -> dict[str, float]:
    """Migrate, make the partitions the leader keeps ahead, fill ``month`` with ``rows``."""
    store = PostgresStore(url, pool_min=1, pool_max=2)
    await store.open()
    try:
        await store.migrate()
        await store.history_partitions_ensure(months_ahead(datetime.now(UTC)))
    finally:
        await store.close()
    conn = await pg_connect(url)
    try:
        steps = await month_build(conn, month, rows, tenant=TENANT, names=1000, first_id=10**12)
        await conn.execute("CHECKPOINT")
        steps["bytes"] = await conn.fetchval(
            "SELECT pg_total_relation_size($1::regclass)", f"history_p{month:%Y%m}"
        )
    finally:
        await conn.close()
    return steps


@contextlib.contextmanager
def copy_of(admin: str, template: str, name: str) -> Iterator[str]:
    """A fresh database copied from ``template`` (files copied: the same pages, vacuumed)."""
    sql_value(admin, f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    try:
        yield f"{admin.rpartition('/')[0]}/{name}"
    finally:
        sql_value(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the round, in its own process -----------------------------------------------------------


async def round_process(url: str, archive_dir: str, month: date) -> None:
    """One ``HistoryMaintenance.run_once()`` as the leader runs it; prints "started", then one
    JSON line with what it did."""
    clock = SystemClock()
    store = PostgresStore(url, pool_min=1, pool_max=1)  # one connection: its backend is known
    await store.open()
    try:
        leader = Leader(store, "archive-bench", ttl_seconds=10, clock=clock)
        leader.is_leader = True
        config = HistoryConfig(defaults=default_policy("P7D", "P30D", "P7D"))
        service = HistoryMaintenance(store, leader, clock, config, Archive(archive_dir))
        records = sum((await store.history_month_counts(month)).values())
        async with store._connection() as conn:
            backend = await conn.fetchval("SELECT pg_backend_pid()")
        print(f"started {backend}", flush=True)
        started = time.time()
        error = None
        try:
            done = await service.run_once()
        except Exception as exc:  # reported, not hidden: a DETACH that timed out, say
            done, error = 0, f"{type(exc).__name__}: {exc}"
        ended = time.time()
        gone = await sql_fetch(url, f"SELECT to_regclass('history_p{month:%Y%m}') IS NULL")
        print(json.dumps({"started": started, "ended": ended, "seconds": ended - started,
                          "records": records, "done": done, "dropped": gone, "error": error}),
              flush=True)  # fmt: skip
    finally:
        await store.close()


async def sql_fetch(url: str, sql: str) -> Any:
    conn = await pg_connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def start_round(
    url: str, archive_dir: str, month: date, nice: int = 0
) -> tuple[subprocess.Popen[str], int]:
    """The round's process, started, and its PostgreSQL backend's pid."""
    args = [sys.executable, __file__, "--round", url, archive_dir, month.isoformat()]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.nice(nice)) if nice else None,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["started"]:
        proc.kill()
        raise RuntimeError(f"the archive round did not start: {line!r}")
    return proc, int(line[1])


def finish_round(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=3600)
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


# -- where the CPU went ------------------------------------------------------------------------


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) jiffies of every core so far (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def processes() -> dict[int, tuple[int, int, str, str]]:
    """pid → (parent pid, user+system jiffies, name, command line) of every process."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (
            int(fields[1]),
            int(fields[11]) + int(fields[12]),
            name,
            cmdline.decode(errors="replace"),
        )
    return found


def category(pid: int, procs: dict[int, tuple[int, int, str, str]], roles: dict[int, str]) -> str:
    """Who a process works for: the first of its ancestors (itself included) with a role, else
    PostgreSQL for its processes, else "other"."""
    seen, at = 0, pid
    while at in procs and seen < 64:
        if at in roles:
            return roles[at]
        cmdline = procs[at][3]
        if "duetime serve" in cmdline:
            return "node"
        if "duetime.bench.receiver" in cmdline:
            return "receiver"
        at, seen = procs[at][0], seen + 1
    return "postgres" if procs.get(pid, (0, 0, ""))[2] == "postgres" else "other"


class Window:
    """CPU by role between the burst's due instant and its last delivery, and the burst's due
    instant itself (read from the bodies the scenario creates)."""

    def __init__(
        self, round_pids: tuple[int, int] | None, archiving: bool, archive_dir: Path
    ) -> None:
        self.archiving = archiving
        self.archive_dir = archive_dir
        self.roles = {os.getpid(): "bench driver"}
        if round_pids is not None:
            self.roles[round_pids[0]] = "round (python)"
            self.roles[round_pids[1]] = "round (postgres backend)"
        self.under_way: list[bool] = []
        """Whether the round's export was under way (begun, not sealed) at the window's start
        and end."""
        self.start: tuple[float, tuple[int, int], dict[int, tuple[int, int, str, str]]] | None
        self.start = None
        self.spent: dict[str, float] = {}
        self._timer: threading.Thread | None = None

    def due(self, at: float) -> None:
        self._timer = threading.Thread(target=self._open, args=(at,), daemon=True)
        self._timer.start()

    def _open(self, at: float) -> None:
        time.sleep(max(0.0, at - time.time()))
        self.start = (time.time(), machine_jiffies(), processes())
        if self.archiving:
            self.under_way.append(self.round_under_way())

    def round_under_way(self) -> bool:
        """The round has begun writing the month's files and has not sealed the month."""
        root = self.archive_dir
        files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
        sealed = any("_manifests" in p.parts for p in files)
        return bool(files) and not sealed

    def close(self) -> None:
        assert self._timer is not None
        self._timer.join()
        assert self.start is not None
        began, (busy0, all0), before = self.start
        (busy1, all1), after, ended = machine_jiffies(), processes(), time.time()
        if self.archiving:
            self.under_way.append(self.round_under_way())
        cores = os.cpu_count() or 1
        self.spent = {"window_s": ended - began, "machine_busy": (busy1 - busy0) / (all1 - all0)}
        for pid, (_, jiffies, _, _) in after.items():
            spent = (jiffies - before.get(pid, (0, 0))[1]) / TICK
            if spent > 0:
                key = f"cpu_s {category(pid, after, self.roles)}"
                self.spent[key] = self.spent.get(key, 0.0) + spent
        self.spent["cpu_s available"] = (ended - began) * cores


@contextlib.contextmanager
def watched(window: Window) -> Iterator[None]:
    """The scenario's own calls, wrapped to tell ``window`` when the burst is due and when it
    was all delivered (nothing else changes)."""
    create, delivered = scenarios.create_batches, scenarios.wait_delivered

    async def create_batches(base: str, bodies: list[dict[str, Any]], concurrency: int = 4) -> None:
        await create(base, bodies, concurrency)
        window.due(datetime.fromisoformat(bodies[0]["run_at"]).timestamp())

    def wait_delivered(url: str, count: int, timeout: float, interval: float = 0.05) -> None:
        delivered(url, count, timeout, interval)
        window.close()

    scenarios.create_batches = create_batches  # type: ignore[assignment]
    scenarios.wait_delivered = wait_delivered  # type: ignore[assignment]
    try:
        yield
    finally:
        scenarios.create_batches = create  # type: ignore[assignment]
        scenarios.wait_delivered = delivered  # type: ignore[assignment]


# -- the runs ----------------------------------------------------------------------------------


def one_run(args: argparse.Namespace, template: str, label: str, n: int) -> dict[str, float]:
    """One burst; "archiving": with the round running in its own process (``--round-in
    process``) or in the node itself (``--round-in node``: the node is given an archive, so
    its leader's history service exports the due month)."""
    month = due_month()
    archiving = label == "archiving"
    with (
        tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp,
        copy_of(args.pg_url, template, f"{PREFIX}_{label}_{n}") as url,
    ):
        env: tuple[tuple[str, str], ...] = ()
        proc, backend = None, 0
        if args.round_in == "node":
            # The leader's first history round comes before it leads; the next one, 2 s later,
            # is the one that exports (idle runs: the same interval, no archive).
            env = (("DUETIME_HISTORY_INTERVAL_SECONDS", "2"),)
            if archiving:
                env += (("DUETIME_ARCHIVE_URL", f"{tmp}/archive"),)
        elif archiving:
            proc, backend = start_round(url, f"{tmp}/archive", month, args.round_nice)
        pids = None if proc is None else (proc.pid, backend)
        window = Window(pids, archiving, Path(tmp, "archive"))
        config = BenchConfig(
            store="postgres", pg_url=args.pg_url, tasks=args.tasks, database=url, node_env=env
        )
        try:
            with watched(window):
                figures = scenarios.burst_http(config, Path(tmp))
        finally:
            result = None if proc is None else finish_round(proc)
    run = {
        "throughput_per_s": figures["throughput_per_s"],
        "lag_p99_s": figures["lag_p99_s"],
        **window.spent,
    }
    if archiving:
        # The burst ran beside the round throughout: its export was under way at both ends
        # (begun before the due instant, not sealed at the last delivery).
        run["round_under_way_at_start_and_end"] = float(all(window.under_way))
    if result is not None:
        if result["error"] or not result["dropped"] or result["done"] != 1:
            raise RuntimeError(f"the archive round did not archive the month: {result}")
        run["round_s"] = result["seconds"]
        run["round_records"] = result["records"]
    return run


def solo_round(args: argparse.Namespace, template: str, n: int) -> dict[str, Any]:
    month = due_month()
    with (
        tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp,
        copy_of(args.pg_url, template, f"{PREFIX}_solo_{n}") as url,
    ):
        return finish_round(start_round(url, f"{tmp}/archive", month)[0])


def show(values: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:.3f}" for k, v in values.items())


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--round":
        url, archive_dir, month = sys.argv[2:]
        asyncio.run(round_process(url, archive_dir, date.fromisoformat(month)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--month-rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20_000, help="burst size")
    parser.add_argument("--solo-rounds", type=int, default=1)
    parser.add_argument(
        "--round-nice", type=int, default=0,
        help="run the round's process at this niceness (its PostgreSQL backend is not lowered)",
    )  # fmt: skip
    parser.add_argument(
        "--round-in", choices=("process", "node"), default="node",
        help="run the round in its own process, or in the burst's node (its leader)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"# machine: {machine()}; speed: {cpu_speed()}", flush=True)
    template = f"{PREFIX}_template"
    sql_value(args.pg_url, f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    sql_value(args.pg_url, f'CREATE DATABASE "{template}"')
    try:
        t0 = time.perf_counter()
        url = f"{args.pg_url.rpartition('/')[0]}/{template}"
        steps = asyncio.run(prepare(url, due_month(), args.month_rows))
        print(f"# month {due_month():%Y-%m}: {args.month_rows:,} records made in "
              f"{time.perf_counter() - t0:.0f} s ({show(steps)})", flush=True)  # fmt: skip
        runs: dict[str, list[dict[str, float]]] = {"idle": [], "archiving": []}
        for i in range(args.repeat):
            for label in runs:
                run = one_run(args, template, label, i)
                runs[label].append(run)
                print(f"run {i + 1} {label}: {show(run)}", flush=True)
        solos = [solo_round(args, template, i) for i in range(args.solo_rounds)]
        for solo in solos:
            print(
                f"round alone: {solo['records']:,} records in {solo['seconds']:.1f} s", flush=True
            )
    finally:
        sql_value(args.pg_url, f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    print(f"burst: {args.tasks:,} http tasks; month: {args.month_rows:,} records; round in "
          f"{args.round_in} (nice {args.round_nice}); medians of {args.repeat}")  # fmt: skip
    medians = {
        label: {k: statistics.median(r.get(k, 0.0) for r in found) for k in {*found[0], *found[-1]}}
        for label, found in runs.items()
    }
    for key in sorted(set(medians["idle"]) | set(medians["archiving"])):
        a, b = medians["idle"].get(key, 0.0), medians["archiving"].get(key, 0.0)
        ratio = f"{b / a:6.2f}" if a else "     -"
        print(f"  {key:34s} idle {a:10.3f}   archiving {b:10.3f}   archiving/idle {ratio}")
    if solos:
        print(f"round alone: median {statistics.median(s['seconds'] for s in solos):.1f} s")


if __name__ == "__main__":
    main()
