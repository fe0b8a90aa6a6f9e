"""Fixtures for the broker deliverers: the real RabbitMQ, NATS (JetStream) and Redis on loopback.

Addresses come from ``DUETIME_TEST_AMQP_URL``, ``DUETIME_TEST_NATS_URL`` and
``DUETIME_TEST_REDIS_URL`` (defaults: the local services). A broker that is not reachable fails
the test with a one-line instruction; it is never skipped. Every test uses its own queue, stream,
subject and key names and removes them afterwards.

Network rule: nothing here may dial a non-loopback address. The ``dials`` fixture (in the
root tests/conftest.py) wraps every socket connect of the test; a non-loopback one is blocked
and fails the test.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from yarl import URL

AMQP_URL = os.environ.get("DUETIME_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("DUETIME_TEST_NATS_URL", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("DUETIME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

_HOW = {
    "RabbitMQ": "start it (e.g. `rabbitmq-server -detached`) or set DUETIME_TEST_AMQP_URL",
    "NATS": "start it with JetStream (`nats-server -js`) or set DUETIME_TEST_NATS_URL",
    "Redis": "start it (`redis-server --daemonize yes`) or set DUETIME_TEST_REDIS_URL",
}


def require(broker: str, url: str) -> str:
    """``url`` when its broker accepts TCP connections; otherwise the test fails with how to
    start it (a missing broker is a broken test setup, not a reason to skip)."""
    parsed = URL(url)
    error: OSError | None = None
    try:
        with socket.create_connection((parsed.host or "127.0.0.1", parsed.port or 0), timeout=2):
            pass
    except OSError as exc:
        error = exc
    if error is not None:
        pytest.fail(
            f"{broker} is not reachable at {parsed.host}:{parsed.port} ({error}); {_HOW[broker]}",
            pytrace=False,
        )
    return url


@pytest.fixture
def amqp_url() -> str:
    return require("RabbitMQ", AMQP_URL)


@pytest.fixture
def nats_url() -> str:
    return require("NATS", NATS_URL)


@pytest.fixture
def redis_url() -> str:
    return require("Redis", REDIS_URL)


@pytest.fixture
async def rabbit(amqp_url: str) -> AsyncIterator[Any]:
    """A channel on the test broker, for declaring and reading queues."""
    import aiormq

    conn = await aiormq.connect(amqp_url)
    try:
        yield await conn.channel()
    finally:
        await conn.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def jetstream(nats_url: str) -> AsyncIterator[Any]:
    """A JetStream context on the test server (the connection closes afterwards)."""
    import nats

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        try:
            await js.account_info()
            enabled = True
        except Exception:
            enabled = False
        if not enabled:
            pytest.fail(f"NATS at {nats_url} has no JetStream; {_HOW['NATS']}", pytrace=False)
        yield js
    finally:
        await nc.close()
