"""``duetime serve``: the HTTP API and the engine of one node, in one process."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import resource
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, cast

import uvicorn

from duetime.config import Settings
from duetime.errors import ConfigError
from duetime.node.connections import ConnectionLimits, guarded_protocol
from duetime.node.wiring import (
    GRACE_SECONDS,
    build_deliverers,
    build_target_validator,
    open_node_store,
    prepare_process,
)
from duetime.observe.logs import log_settings
from duetime.store import store_from_url

if TYPE_CHECKING:
    from duetime.schedule.evaluation import EvaluationPool
    from duetime.store.postgres.backend import PostgresStore
    from duetime.store.sqlite.lockfile import NodeLock

log = logging.getLogger("duetime.server")


def serve(settings: Settings) -> None:
    """Run one node until SIGTERM/SIGINT. Raises ``ConfigError`` for settings that cannot work,
    a SQLite file another node holds, or a port already in use — before touching the store."""
    settings.check()
    lock = sqlite_node_lock(settings)
    try:
        sock = bind_socket(settings.host, settings.port)
        try:
            prepare_process(settings)
            asyncio.run(run_node(settings, sock=sock, own_process=True))
        finally:
            sock.close()
    finally:
        if lock is not None:
            lock.release()


def sqlite_node_lock(settings: Settings) -> NodeLock | None:
    """The exclusive lock of the node's SQLite file (None on PostgreSQL or in memory)."""
    if not settings.is_sqlite:
        return None
    from duetime.store.sqlite.backend import SqliteStore
    from duetime.store.sqlite.lockfile import NodeLock

    store = store_from_url(settings.db_url, data_dir=settings.data_dir)
    if not isinstance(store, SqliteStore) or str(store.path) == ":memory:":
        return None
    return NodeLock(store.path).acquire()


def bind_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the store is opened or migrated, so a port in use is
    one clear ``ConfigError`` rather than a traceback after the work of starting. It listens
    only once the server starts: until then connections are refused, not left waiting."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve the bind address {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def connection_limits(settings: Settings) -> ConnectionLimits:
    """What one connection may cost the node (:mod:`duetime.node.connections`)."""
    return ConnectionLimits(
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
        max_connections=settings.max_connections,
    )


_OTHER_FILES = 256
"""Files a node holds open besides its clients' connections (store, deliveries, logs)."""


def check_open_files(max_connections: int) -> None:
    """Make room for ``max_connections`` connections and the node's other files: raise the soft
    open-file limit up to the hard one when it is lower, and warn when even the hard limit is
    too low (past it, accepting fails for everyone instead of the cap refusing one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + _OTHER_FILES
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft < wanted:
        log.warning(
            "the open-file limit (%d, ulimit -Hn) is below DUETIME_MAX_CONNECTIONS (%d) + %d: "
            "raise the limit or lower DUETIME_MAX_CONNECTIONS",
            soft,
            max_connections,
            _OTHER_FILES,
        )


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine reaches a node bound to ``host:port`` at (what the
    start-up line tells clients to set as ``DUETIME_URL``): a wildcard bind is reached on
    loopback, an IPv6 address in brackets."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.asynccontextmanager
async def _closing(evaluations: EvaluationPool) -> AsyncIterator[None]:
    try:
        yield
    finally:
        evaluations.close()


class _Server(uvicorn.Server):
    """uvicorn without its signal capture: the node handles SIGTERM/SIGINT itself, so it can stop
    the engine gracefully after the server has closed."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def run_node(
    settings: Settings,
    *,
    ready: asyncio.Event | None = None,
    sock: socket.socket | None = None,
    own_process: bool = False,
) -> None:
    """The whole node: store, engine (unless ``settings.engine`` is False) and the API server,
    on ``sock`` when given (see :func:`bind_socket`), else on ``settings.host``/``port``.
    ``own_process``: the process is the node's alone (``duetime serve``), so what it has loaded
    once listening is frozen out of the garbage collector's full scans."""
    from duetime.api.app import create_app
    from duetime.engine.engine import Engine
    from duetime.node.processes import DispatchProcesses, for_process
    from duetime.schedule.evaluation import configure_node_pool

    log_settings(settings, log)
    check_open_files(settings.max_connections)
    if settings.dev_mode:
        log.warning("dev mode: no DUETIME_ADMIN_TOKEN, auth is off (loopback only)")
    evaluations = configure_node_pool(settings.evaluation_processes, settings.evaluation_per_tenant)
    async with open_node_store(settings) as store, _closing(evaluations):
        await evaluations.warm()  # the API's and the materializer's (schedule/evaluation.py)
        app = create_app(
            settings,
            store,
            validate_target=build_target_validator(settings),
            evaluations=evaluations,
        )
        engine: Engine | None = None
        processes: DispatchProcesses | None = None
        if settings.engine:
            # The node process's dispatcher takes its share; DispatchProcesses run the others.
            mine = for_process(settings, 0)
            engine = Engine(store, mine, build_deliverers(mine, store))
            if not settings.is_sqlite:  # the SQL API is PostgreSQL's
                from duetime.api.sql_intake import WorkflowIntake

                engine.more.append(
                    WorkflowIntake(
                        cast("PostgresStore", store),
                        app.state.services.creator,
                        engine.clock,
                        interval=settings.poll_interval_seconds,
                    )
                )
            engine.busy_elsewhere.append(app.state.services.pulse.busy)
            await engine.start()
            processes = DispatchProcesses(settings)
            processes.start()
            engine.busy_elsewhere.append(processes.busy)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            # Slow heads and bodies, oversized heads and connections past the cap are refused
            # (node/connections.py); idle kept-alive connections close after keep_alive_seconds.
            http=guarded_protocol(connection_limits(settings)),
            timeout_keep_alive=settings.keep_alive_seconds,
            # Long polls and bulk walks are stopped at shutdown (shut_down below); anything
            # else still running after the grace period is cancelled rather than waited for.
            timeout_graceful_shutdown=int(GRACE_SECONDS),
            log_level=settings.log_level.lower(),
            # Its lines go through duetime's handler (observe/logs.py), JSON when asked.
            log_config=None,
            access_log=False,
            lifespan="off",
        )
        server = _Server(config)
        loop = asyncio.get_running_loop()

        def shut_down() -> None:
            server.should_exit = True
            app.state.services.leases.close()  # answer waiting lease polls now
            app.state.services.walks.close()  # stop bulk walks: they answer 503 now

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, shut_down)
        try:
            serving = asyncio.create_task(server.serve(sockets=None if sock is None else [sock]))
            while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn has no event
                await asyncio.sleep(0.01)
            if serving.done():
                with contextlib.suppress(SystemExit):
                    await serving
                raise ConfigError(f"could not listen on {settings.host}:{settings.port}")
            port = settings.port if sock is None else sock.getsockname()[1]
            url = client_url(settings.host, port)
            log.info(
                "duetime listening on http://%s:%d (store %s); clients: DUETIME_URL=%s",
                settings.host,
                port,
                settings.db_url.split("@")[-1],
                url,
                extra={"event": "listening", "client_url": url},
            )
            if own_process:
                # A batch create allocates tens of thousands of objects, enough for a full
                # collection every call or two, and each one walked every module, model and
                # route loaded at start: ~10 us of node CPU per created task.
                gc.freeze()
            if ready is not None:
                ready.set()
            await serving
        finally:
            if engine is not None and processes is not None:
                await asyncio.gather(engine.stop(GRACE_SECONDS), processes.stop(GRACE_SECONDS))
