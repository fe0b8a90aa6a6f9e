"""What every process of a node builds alike: logging and the event loop, the store, the
deliverers and the create-time target check (the node in :mod:`duetime.node.server`, its
dispatcher processes in :mod:`duetime.node.processes`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from duetime.config import Settings
from duetime.delivery.base import Deliverer
from duetime.observe import tracing
from duetime.observe.logs import configure_logging
from duetime.observe.storetime import timed
from duetime.store import Store, store_from_url
from duetime.types import TargetType

log = logging.getLogger("duetime.server")

GRACE_SECONDS = 10.0
"""In-flight deliveries get this long to finish when the node (or a dispatcher process) stops."""


def prepare_process(settings: Settings) -> None:
    """Logging and the event loop, alike in the node and in its dispatcher processes."""
    configure_logging(settings.log_level, settings.log_format)
    tracing.setup()
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
        yield timed(store)
    finally:
        await store.close()


def build_deliverers(settings: Settings, store: Store) -> dict[TargetType, Deliverer]:
    """The push deliverers this node runs, by target type (see :mod:`duetime.delivery.registry`),
    webhooks presenting the node's outbound identity (its keys and certificates in ``store``)."""
    from duetime.delivery.outbound import OutboundIdentity
    from duetime.delivery.registry import build_deliverers as build

    return build(settings, identity=OutboundIdentity.from_settings(store, settings))


def build_target_validator(
    settings: Settings,
) -> Callable[[Mapping[str, Any]], Mapping[str, Any] | None]:
    """Checks a target at create time, so a task that can never be delivered is a 422 (and
    returns it with a broker URL's secret sealed, when it has one)."""
    from duetime.delivery.registry import target_validator

    return target_validator(settings)
