"""Fixtures shared by every test layer, and the layers themselves.

The layers, by cost (CONTRIBUTING.md lists the commands and what each takes):

- ``unit`` (``tests/unit``): no database server, no running ``duetime`` node; seconds.
- ``cli`` (``tests/cli``): the ``duetime`` command, in process, against a fake or an in-process
  API (SQLite); seconds.
- store conformance (``tests/store``): every test on both backends, always.
- API and engine (every other directory using the ``store`` fixture, and ``tests/contract``): on
  the backends ``--store`` names (``sqlite``, ``postgres`` or ``both``; else the environment's
  ``DUETIME_TEST_STORES``; default ``sqlite``). CI runs ``--store=both``. Tests that need
  PostgreSQL itself (several nodes, LISTEN/NOTIFY, killed sessions) ask for ``pg_url`` and run on
  it whatever ``--store`` says.
- ``acceptance`` and ``faults``: real ``duetime`` processes. Opt-in locally, skipped with the way
  to run them unless ``--run-slow`` is given, ``-m`` names their marker, the command line names
  their file or directory, or ``CI`` is set; ``scripts/test`` (CI) always passes ``--run-slow``.

PostgreSQL: ``DUETIME_TEST_PG_URL`` names a server and a database we may connect to in order to
create others (default: the local trust-auth server). Each test gets a fresh database cloned from
a migrated template made once per test process, so tests never see each other's rows. A server
that does not answer fails the test with a one-line instruction; it is never skipped.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import queue
import re
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from duetime.clock import FakeClock
from duetime.store import Store, store_from_url

PG_ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

STORES = ("sqlite", "postgres")
HERE = Path(__file__).resolve().parent
LAYER_MARKERS = {"unit": HERE / "unit", "cli": HERE / "cli", "conformance": HERE / "store"}
SLOW_DIRS = {"acceptance": HERE / "acceptance", "faults": HERE / "faults"}
"""Markers of the tests that drive real processes, and the directories that hold them."""


# -- layers: which backends, which markers, what runs by default -----------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("duetime")
    group.addoption(
        "--store",
        choices=("sqlite", "postgres", "both"),
        default=None,
        help="backends of the API and engine tests (tests/store always runs on both); "
        "default: $DUETIME_TEST_STORES, else sqlite",
    )
    group.addoption(
        "--run-slow",
        action="store_true",
        help="run the acceptance and fault tests (real processes); CI and scripts/test do",
    )


def selected_stores(config: pytest.Config) -> tuple[str, ...]:
    """The backends ``--store`` (or ``DUETIME_TEST_STORES``) names for the API and engine tests."""
    choice = config.getoption("--store") or os.environ.get("DUETIME_TEST_STORES") or "sqlite"
    if choice == "both":
        return STORES
    names = tuple(name.strip() for name in choice.split(",") if name.strip())
    if not names or any(name not in STORES for name in names):
        raise pytest.UsageError(
            f"DUETIME_TEST_STORES={choice!r}: say sqlite, postgres or both (or sqlite,postgres)"
        )
    return tuple(name for name in STORES if name in names)


def pytest_configure(config: pytest.Config) -> None:
    selected_stores(config)  # a bad DUETIME_TEST_STORES stops the run at once, in one line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``store_backend`` (behind ``store_url``, ``store`` and the contract ``server``): both
    backends under tests/store, the selected ones elsewhere. Module-scoped, so a module's tests
    run on one backend, then on the next."""
    if "store_backend" in metafunc.fixturenames:
        path = metafunc.definition.path.resolve()
        conformance = LAYER_MARKERS["conformance"] in path.parents
        stores = STORES if conformance else selected_stores(metafunc.config)
        metafunc.parametrize("store_backend", stores, scope="module")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


def _slow_wanted(config: pytest.Config, path: Path, marker: str) -> bool:
    """Whether a test with the slow ``marker`` in the file at ``path`` runs in this pytest run."""
    if config.getoption("--run-slow") or _truthy(os.environ.get("CI")):
        return True
    if re.search(rf"\b{marker}\b", config.getoption("markexpr", "") or ""):
        return True
    for arg in config.args:  # the test's file, or a directory of slow tests, named outright
        target = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if target == path:
            return True
        slow_dir = any(d == target or d in target.parents for d in SLOW_DIRS.values())
        if slow_dir and target in path.parents:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its layer (``-m unit``, ``-m cli``, ``-m conformance``,
    ``-m acceptance``, ``-m faults``) and skip real-process tests that were not asked for,
    saying how to ask."""
    for item in items:
        path = item.path.resolve()
        for marker, directory in (*LAYER_MARKERS.items(), *SLOW_DIRS.items()):
            # tests/faults also holds checks of the invariant checker and of one leader in this
            # process: only its tests with real processes (the ``procs`` fixture) are ``faults``.
            if marker == "faults" and "procs" not in getattr(item, "fixturenames", ()):
                continue
            if directory in path.parents:
                item.add_marker(getattr(pytest.mark, marker))
        slow = [m for m in SLOW_DIRS if item.get_closest_marker(m) is not None]
        if slow and not _slow_wanted(config, path, slow[0]):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{slow[0]} test (real duetime processes): opt-in locally; run it with "
                    f"--run-slow, -m {slow[0]} or by naming its file (make check and CI do)"
                )
            )


# -- pytest-xdist: the real-process tests on one worker, one at a time ---------------------------

REAL_PROCESSES = "real-processes"
_REAL_PROCESS_MARKS = re.compile(r"mark\.(acceptance|faults)\b")


def _drives_real_processes(rootdir: Path, file: str, seen: dict[str, bool]) -> bool:
    """Whether the test file ``file`` (relative to ``rootdir``) holds real-process tests: it is in
    a directory of them, or it marks tests ``acceptance`` or ``faults`` itself."""
    if file not in seen:
        path = (rootdir / file).resolve()
        in_slow_dir = any(d in path.parents for d in SLOW_DIRS.values())
        seen[file] = in_slow_dir or bool(_REAL_PROCESS_MARKS.search(path.read_text()))
    return seen[file]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` (scripts/test runs ``-n 2 --dist loadscope --no-loadscope-reorder``),
    with one change: every file of real-process tests joins one scope, run by one worker, one
    test at a time, first (it is the longest), while the other worker takes the in-process test
    files. A burst and its timing bounds then share the machine with in-process tests only, as
    under any load, never with another burst; module-scoped fixtures (a wheel build, a cluster
    of nodes) are made once. The controller sees node ids only, not markers: a file is
    recognised by its directory or by naming the marker (see :func:`_drives_real_processes`).
    ``xdist_group`` would say the same but is ignored under pytest 9 (xdist 3.8 renames
    ``item._nodeid``, which pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    seen: dict[str, bool] = {}

    class RealProcessesApart(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            if _drives_real_processes(config.rootpath, file, seen):
                return REAL_PROCESSES
            return file

    return RealProcessesApart(config, log)


def _with_db(url: str, db: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{db}"


async def _admin_execute(*statements: str) -> None:
    try:
        conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({exc}); "
            "run ./scripts/test (it starts a throwaway server) or set DUETIME_TEST_PG_URL",
            pytrace=False,
        )
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """Name of a migrated template database, private to this test process."""
    name = f"duetime_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"

    async def make() -> None:
        await _admin_execute(f'CREATE DATABASE "{name}"')
        store = store_from_url(_with_db(PG_ADMIN_URL, name))
        await store.open()
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(make())
    yield name
    asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class FreshDatabases:
    """Fresh databases cloned from the template one test ahead, and dropped after their test, on
    a thread of this class's own: a test still takes a database nobody has touched, while
    the server's ~0.1-0.3 s of cloning (8 MB copied through the WAL) and dropping runs beside the
    previous test instead of before this one. One statement at a time, on one admin
    connection."""

    AHEAD = 1

    def __init__(self, template: str) -> None:
        self.template = template
        self._jobs: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._ready: queue.SimpleQueue[str | BaseException] = queue.SimpleQueue()
        self._failed: list[str] = []
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._work()), name="fresh-databases", daemon=True
        )
        self._thread.start()
        for _ in range(self.AHEAD):
            self._jobs.put(("create", ""))

    def take(self) -> str:
        """The URL of a fresh, migrated, empty database (a new one starts cloning meanwhile)."""
        self._jobs.put(("create", ""))
        made = self._ready.get(timeout=120)
        if isinstance(made, BaseException):
            if not isinstance(made, OSError | asyncpg.PostgresError):
                raise made
            pytest.fail(
                f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({made}); "
                "run ./scripts/test (it starts a throwaway server) or set DUETIME_TEST_PG_URL",
                pytrace=False,
            )
        return _with_db(PG_ADMIN_URL, made)

    def discard(self, url: str) -> None:
        """Drop the database at ``url`` (with its connections) once the thread gets to it."""
        self._jobs.put(("drop", url.rpartition("/")[2]))

    def close(self) -> None:
        """Drop every database still made or waiting, then stop the thread; AssertionError if a
        drop failed."""
        self._jobs.put(None)
        self._thread.join(120)
        assert not self._thread.is_alive(), "the databases of this test run were not all dropped"
        assert not self._failed, f"dropping test databases failed: {self._failed}"

    async def _work(self) -> None:
        conn: asyncpg.Connection | None = None
        made: list[str] = []
        try:
            while (job := await asyncio.to_thread(self._jobs.get)) is not None:
                kind, name = job
                try:
                    if conn is None or conn.is_closed():
                        conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
                    if kind == "create":
                        name = f"duetime_t_{uuid.uuid4().hex[:12]}"
                        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
                        made.append(name)
                        self._ready.put(name)
                    else:
                        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                        made.remove(name)
                except Exception as exc:  # handed to the test that waits, or to close()
                    if kind == "create":
                        self._ready.put(exc)
                    else:
                        self._failed.append(f"{name}: {exc!r}")
            for name in made:  # made ahead and never taken
                assert conn is not None
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            if conn is not None:
                await conn.close()


@pytest.fixture(scope="session")
def fresh_databases(pg_template: str) -> Iterator[FreshDatabases]:
    databases = FreshDatabases(pg_template)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def pg_url(fresh_databases: FreshDatabases) -> Iterator[str]:
    """URL of a fresh, migrated, empty PostgreSQL database for this test."""
    url = fresh_databases.take()
    yield url
    fresh_databases.discard(url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'duetime.db'}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store_url(store_backend: str, request: pytest.FixtureRequest) -> str:
    """A fresh store URL, once per backend this test runs on (``store_backend``, see
    :func:`pytest_generate_tests`): tests using it run unchanged against each."""
    name = "pg_url" if store_backend == "postgres" else "sqlite_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
async def store(store_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    """An open, migrated store on each backend, whose time is the test's :class:`FakeClock`."""
    s = store_from_url(store_url, clock=clock)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every address a socket of this test connects to; a non-loopback one is blocked."""
    seen: list[Any] = []
    blocked: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def allowed(address: Any) -> bool:
        seen.append(address)
        if isinstance(address, tuple):
            host = str(address[0]).split("%")[0]
            if not ipaddress.ip_address(host).is_loopback:
                blocked.append(address)
                return False
        return True

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(address):
            raise ConnectionRefusedError(f"test network rule: {address} is not loopback")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(address):
            raise ConnectionRefusedError(f"test network rule: {address} is not loopback")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield seen
    assert not blocked, f"the test tried to dial non-loopback addresses: {blocked}"


async def stored_text(url: str) -> str:
    """Every row of every table of the store at ``url``, as text: what a test reads to prove a
    value was never stored (in any table, index-free: the rows themselves)."""
    if url.startswith("sqlite:"):
        import sqlite3

        rest = url.removeprefix("sqlite:").removeprefix("//")  # as store_from_url reads it
        db = sqlite3.connect(rest[1:] if rest.startswith("/") else rest)
        try:
            tables = [
                r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return "\n".join(
                repr(row) for table in tables for row in db.execute(f'SELECT * FROM "{table}"')
            )
        finally:
            db.close()
    conn = await asyncpg.connect(url)
    try:
        tables = await conn.fetch(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' "
            "AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        parts = []
        for t in tables:
            rows = await conn.fetch(
                f'SELECT t::text AS row FROM "{t["table_schema"]}"."{t["table_name"]}" AS t'
            )
            parts.extend(r["row"] for r in rows)
        return "\n".join(parts)
    finally:
        await conn.close()


@pytest.fixture
def stored(store_url: str) -> Callable[[], Awaitable[str]]:
    """Reads every row of the test's store as text (:func:`stored_text`)."""
    return lambda: stored_text(store_url)
