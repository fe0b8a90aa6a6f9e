"""PostgreSQL's own CPU per task in each phase of a worker task's life, as the node drives it.

A default-worker burst is CPU-bound on two cores and PostgreSQL is most of it
(``benchmarks/worker_burst.py`` prints ``pg_burst_cpu_s``), but a burst's wall-clock figures
move with this machine's speed from one minute to the next. CPU time per task moves much less,
so this prices each phase by the CPU seconds every ``postgres`` process spent on it (read from
``/proc``; Linux only), per task, on a fresh database each run:

    create    ``task_create_many`` of 1,000 worker tasks at a time, due one second ahead
    promote   the promoter's rounds (``task_promote_due(1000)``) once they are due
    claim     the lease API's claim (``task_claim``: one tenant's queue, ``--batch`` a call)
    ack       the lease API's acks by lease id (``task_complete_leased``, ``--ack`` a call)
    move      the history mover's rounds afterwards (``history_pending_move(100)`` until none is
              left): the audit records of every phase, written behind (ADR 0008), moved into
              the history table

``--variant`` changes the fresh schema first, to price a part of it (never do this to a real
store): ``nohistory`` disables the audit trail's triggers, ``nocounts`` the maintained counts',
``no-<index>`` drops that index. Variants run in turn within each round::

    .venv/bin/python benchmarks/pg_cpu_phases.py [--rounds 3] [--variant default,nohistory]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
from pathlib import Path

from duetime.bench.runs import (
    ADMIN_URL,
    BenchConfig,
    bench_store,
    due_after_creating,
    postgres_cpu_seconds,
    sleep_until_due,
    sql_value,
)
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import ClaimRequest, NewTask, TargetType

VARIANTS = {
    "default": (),
    "nohistory": (
        "ALTER TABLE tasks DISABLE TRIGGER tasks_history_insert",
        "ALTER TABLE tasks DISABLE TRIGGER tasks_history_update",
        "ALTER TABLE attempts DISABLE TRIGGER attempts_history_insert",
    ),
    "nocounts": (
        "ALTER TABLE tasks DISABLE TRIGGER task_counts_insert",
        "ALTER TABLE tasks DISABLE TRIGGER task_counts_update",
    ),
}
PHASES = ("create", "promote", "claim", "ack", "move")


def schema_changes(variant: str) -> tuple[str, ...]:
    if variant.startswith("no-"):
        return (f'DROP INDEX "{variant[3:]}"',)
    return VARIANTS[variant]


async def one_run(url: str, variant: str, n: int, batch: int, ack: int) -> dict[str, float]:
    """Microseconds of PostgreSQL CPU per task in each phase, on the fresh database ``url``."""
    store = PostgresStore(url, pool_min=2, pool_max=4)
    await store.open()
    try:
        await store.migrate()
        conn = await pg_connect(url)
        try:
            for statement in schema_changes(variant):
                await conn.execute(statement)
        finally:
            await conn.close()
        due = await due_after_creating(store, n)
        new = NewTask(
            tenant_id="default",
            target={"type": "worker"},
            name="noop",
            queue="q",
            payload_json='{"k": "v"}',
            run_at=due,
        )
        spent = dict.fromkeys(PHASES, 0.0)
        start = postgres_cpu_seconds()
        for _ in range(0, n, 1000):
            await store.task_create_many([new] * 1000)
        spent["create"] = postgres_cpu_seconds() - start
        await sleep_until_due(store, due)
        start, moved = postgres_cpu_seconds(), 0
        while moved < n:
            moved += await store.task_promote_due(1000)
        spent["promote"] = postgres_cpu_seconds() - start
        claim = ClaimRequest(
            worker_id="bench",
            limit=batch,
            target_types=frozenset({TargetType.WORKER}),
            queue="q",
            tenant_id="default",
        )
        done = 0
        while done < n:
            start = postgres_cpu_seconds()
            leases = await store.task_claim(claim)
            claimed = postgres_cpu_seconds()
            ids = [lease.lease_id for lease in leases]
            for i in range(0, len(ids), ack):
                part = ids[i : i + ack]
                ended = await store.task_complete_leased("default", part, [None] * len(part))
                assert len(ended) == len(part), "a fresh lease was refused"
            spent["claim"] += claimed - start
            spent["ack"] += postgres_cpu_seconds() - claimed
            done += len(leases)
        start = postgres_cpu_seconds()
        while await store.history_pending_move(100):
            pass
        spent["move"] = postgres_cpu_seconds() - start
        return {phase: seconds / n * 1e6 for phase, seconds in spent.items()}
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500, help="tasks per claim")
    parser.add_argument("--ack", type=int, default=150, help="leases per ack call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", default="default", help="a comma list (see the top)")
    args = parser.parse_args()
    variants = args.variant.split(",")
    for variant in variants:
        if variant not in VARIANTS and not variant.startswith("no-"):
            parser.error(f"unknown variant {variant!r}")
    version = sql_value(args.admin_url, "SHOW server_version")
    config = BenchConfig(store="postgres", pg_url=args.admin_url)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
        f" | PostgreSQL {version} | tasks={args.tasks} claim batch={args.batch}"
        f" ack batch={args.ack} | PostgreSQL CPU, microseconds per task",
        flush=True,
    )
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for round_ in range(1, args.rounds + 1):
        for variant in variants:
            with bench_store(config, Path(tempfile.gettempdir())) as url:
                spent = asyncio.run(one_run(url, variant, args.tasks, args.batch, args.ack))
            runs[variant].append(spent)
            print(f"round {round_} {variant}: " + _line(spent), flush=True)
    for variant, found in runs.items():
        medians = {p: statistics.median(r[p] for r in found) for p in PHASES}
        print(f"median {variant}: " + _line(medians))


def _line(spent: dict[str, float]) -> str:
    burst = spent["promote"] + spent["claim"] + spent["ack"]
    return ", ".join(f"{p} {spent[p]:.1f}" for p in PHASES) + f"; promote+claim+ack {burst:.1f}"


if __name__ == "__main__":
    main()
