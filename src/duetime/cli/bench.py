"""``duetime bench SCENARIO``: run a benchmark scenario and print medians of repeated runs."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.cli.common import server_module

bench_app = typer.Typer(help="Measure duetime on this machine (real processes on loopback).")


@bench_app.command("run")
def bench_run(
    scenario: Annotated[str, typer.Argument(help="a scenario: see `duetime bench list`")],
    store: Annotated[str, typer.Option(help="sqlite or postgres")] = "sqlite",
    tasks: Annotated[int, typer.Option(help="tasks per run (bursts, batches, steady)")] = 20_000,
    repeat: Annotated[int, typer.Option(help="runs; the medians are reported")] = 3,
    pg_url: Annotated[
        str,
        typer.Option(
            envvar="DUETIME_BENCH_PG_URL",
            help="PostgreSQL server (a database is created and dropped per run)",
        ),
    ] = "postgresql://postgres@127.0.0.1:5432/test",
    node_env: Annotated[
        list[str] | None, typer.Option("--env", help="NAME=VALUE for the duetime node")
    ] = None,
) -> None:
    """Run SCENARIO --repeat times against a fresh store each time."""
    # The scenarios drive a node with aiohttp and asyncpg: the server extra, imported on use so
    # that the lean client's `duetime --help` works without it.
    scenarios = server_module("duetime.bench.scenarios")
    SCENARIOS, BenchConfig, run = scenarios.SCENARIOS, scenarios.BenchConfig, scenarios.run
    if scenario not in SCENARIOS:
        raise typer.BadParameter(
            f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}"
        )
    if store not in ("sqlite", "postgres"):
        raise typer.BadParameter("--store must be sqlite or postgres")
    pairs = tuple(tuple(item.split("=", 1)) for item in (node_env or []) if "=" in item)
    config = BenchConfig(
        store=store,
        pg_url=pg_url,
        tasks=tasks,
        repeat=repeat,
        node_env=pairs,
    )
    run(scenario, config, echo=typer.echo)


@bench_app.command("list")
def bench_list() -> None:
    """List the scenarios."""
    SCENARIOS = server_module("duetime.bench.scenarios").SCENARIOS
    for name, fn in SCENARIOS.items():
        typer.echo(f"{name}: {(fn.__doc__ or '').strip().splitlines()[0]}")
