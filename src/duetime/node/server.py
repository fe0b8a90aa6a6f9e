"""``duetime serve``: the HTTP API and the engine of one node, in one process."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import signal
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import uvicorn

from duetime.config import Settings
from duetime.errors import ConfigError
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
    from duetime.api.leasing import end_long_polls
    from duetime.engine.engine import Engine
    from duetime.node.processes import DispatchProcesses, for_process

    log_settings(settings, log)
    if settings.dev_mode:
        log.warning("dev mode: no DUETIME_ADMIN_TOKEN, auth is off (loopback only)")
    async with open_node_store(settings) as store:
        app = create_app(settings, store, validate_target=build_target_validator(settings))
        engine: Engine | None = None
        processes: DispatchProcesses | None = None
        if settings.engine:
            # The node process's dispatcher takes its share; DispatchProcesses run the others.
            mine = for_process(settings, 0)
            engine = Engine(store, mine, build_deliverers(mine))
            engine.busy_elsewhere.append(app.state.services.pulse.busy)
            await engine.start()
            processes = DispatchProcesses(settings)
            processes.start()
            engine.busy_elsewhere.append(processes.busy)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            access_log=False,
            lifespan="off",
        )
        server = _Server(config)
        loop = asyncio.get_running_loop()

        def shut_down() -> None:
            server.should_exit = True
            end_long_polls(app.state)  # answer waiting lease polls now, not after wait_seconds

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
            log.info(
                "duetime listening on http://%s:%d (store %s)",
                settings.host,
                settings.port if sock is None else sock.getsockname()[1],
                settings.db_url.split("@")[-1],
            )
            if own_process:
                # A batch create allocates tens of thousands of objects, enough for a full
                # collection every call or two, and each one walked every module, model and
                # route loaded at start: ~10 us of node CPU per created task
                # (docs/benchmarks.md, ninth session).
                gc.freeze()
            if ready is not None:
                ready.set()
            await serving
        finally:
            if engine is not None and processes is not None:
                await asyncio.gather(engine.stop(GRACE_SECONDS), processes.stop(GRACE_SECONDS))
