"""``duetime serve``: the HTTP API and the engine of one node, in one process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import uvicorn

from duetime.config import Settings
from duetime.delivery.base import Deliverer
from duetime.errors import ConfigError
from duetime.store import Store, store_from_url
from duetime.types import TargetType

log = logging.getLogger("duetime.server")

GRACE_SECONDS = 10.0
"""In-flight deliveries get this long to finish when the node (or a dispatcher process) stops."""


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def serve(settings: Settings) -> None:
    """Run one node until SIGTERM/SIGINT. Raises ``ConfigError`` for settings that cannot work."""
    settings.check()
    prepare_process(settings)
    asyncio.run(run_node(settings))


def prepare_process(settings: Settings) -> None:
    """Logging and the event loop, alike in the node and in its dispatcher processes."""
    configure_logging(settings.log_level)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        pass


@contextlib.asynccontextmanager
async def open_node_store(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Store]:
    """Open the store and, with ``migrate``, bring its schema up to date (SQLite always;
    PostgreSQL too, under an advisory lock, so a fresh database needs no separate
    ``duetime migrate``). Dispatcher processes skip it: their node has done it."""
    store = store_from_url(settings.db_url, data_dir=settings.data_dir)
    await store.open()
    try:
        applied = await store.migrate() if migrate else []
        if applied:
            log.info("applied migrations: %s", ", ".join(applied))
        yield store
    finally:
        await store.close()


def build_deliverers(settings: Settings) -> dict[TargetType, Deliverer]:
    """The push deliverers this node runs, by target type (see :mod:`duetime.delivery.registry`)."""
    from duetime.delivery.registry import build_deliverers as build

    return build(settings)


def build_target_validator(settings: Settings) -> Callable[[Mapping[str, Any]], None]:
    """Checks a target at create time, so a task that can never be delivered is a 422."""
    from duetime.delivery.registry import target_validator

    return target_validator(settings)


class _Server(uvicorn.Server):
    """uvicorn without its signal capture: the node handles SIGTERM/SIGINT itself, so it can stop
    the engine gracefully after the server has closed."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def run_node(settings: Settings, *, ready: asyncio.Event | None = None) -> None:
    """The whole node: store, engine (unless ``settings.engine`` is False) and the API server."""
    from duetime.api.app import create_app
    from duetime.api.leasing import end_long_polls
    from duetime.engine.engine import Engine
    from duetime.engine.processes import DispatchProcesses, for_process

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
            await engine.start()
            processes = DispatchProcesses(settings)
            processes.start()
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
            serving = asyncio.create_task(server.serve())
            while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn has no event
                await asyncio.sleep(0.01)
            if serving.done():
                with contextlib.suppress(SystemExit):
                    await serving
                raise ConfigError(f"could not listen on {settings.host}:{settings.port}")
            log.info(
                "duetime listening on http://%s:%d (store %s)",
                settings.host,
                settings.port,
                settings.db_url.split("@")[-1],
            )
            if ready is not None:
                ready.set()
            await serving
        finally:
            if engine is not None and processes is not None:
                await asyncio.gather(engine.stop(GRACE_SECONDS), processes.stop(GRACE_SECONDS))
