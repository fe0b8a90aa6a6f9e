"""Store round-trip times: :func:`timed` wraps an opened store so that every coroutine method
it has (today's and any added later) is timed in ``duetime_store_seconds{operation}`` and its
failures counted in ``duetime_store_errors_total{operation,kind}``.

The wrapper is transparent: attributes that are not coroutine methods (``ready_signal``,
``path``...) are the store's own. The cost is one histogram observation per call (about a
microsecond), small next to any store round trip.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from duetime import metrics
from duetime.errors import StoreUnavailable
from duetime.store.protocols import Store


class TimedStore:
    """A store whose coroutine methods are timed (see the module)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self._wrapped: dict[str, Any] = {}

    @property
    def inner(self) -> Store:
        """The store being timed."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        found = self._wrapped.get(name)
        if found is not None:
            return found
        value = getattr(self._inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(value):
            return value
        found = _timing(name, value)
        self._wrapped[name] = found
        return found


def _timing(name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def timed_call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call(*args, **kwargs)
        except StoreUnavailable:
            metrics.child(metrics.STORE_CALL_ERRORS, name, "unavailable").inc()
            raise
        except Exception:
            metrics.child(metrics.STORE_CALL_ERRORS, name, "error").inc()
            raise
        finally:
            # Looked up per call: a dispatcher process starts forwarding after it opened its store.
            metrics.child(metrics.STORE_SECONDS, name).observe(time.perf_counter() - started)

    timed_call.__name__ = name
    return timed_call


def timed(store: Store) -> Store:
    """``store`` with its round trips timed (a store already timed is returned as it is)."""
    if isinstance(store, TimedStore):
        return cast(Store, store)
    return cast(Store, TimedStore(store))
