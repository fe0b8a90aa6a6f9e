"""Values between Python and the SQLite schema (rows become duetime values in
:mod:`duetime.store.core.rows`, through :class:`~duetime.store.sqlite.driver.SqliteDecode`).

Timestamps are stored as INTEGER microseconds since the Unix epoch (UTC), JSON columns as text and
booleans as 0/1 (see ``migrations/0001_init.sql``). Every datetime handed out is timezone-aware UTC.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from duetime.types import RetryPolicy

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(when: datetime) -> int:
    """Microseconds since the epoch. A naive datetime is taken to be UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // _MICROSECOND


@functools.lru_cache(maxsize=16_384)
def from_micros(micros: int) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the epoch.

    Cached: the rows of one batch share a handful of instants (one "now" per transaction), and
    datetimes are immutable, so sharing them is safe and saves most of the conversion time.
    """
    return _EPOCH + timedelta(microseconds=micros)


@functools.lru_cache(maxsize=1024)
def retry_to_json(policy: RetryPolicy) -> str:
    """The ``retry`` column for a policy (cached: policies are read-only, few distinct exist)."""
    return dumps(policy.to_json())


def dumps(value: Any) -> str:
    """JSON text for a column (compact; orjson keeps key order)."""
    return orjson.dumps(value).decode()
