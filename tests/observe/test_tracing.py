"""Traces with the in-memory span exporter: a ``traceparent`` given at create is stored with
the task, flows to the webhook request (as the delivery span's child context) and to the
worker's job; every span of a task is in the task's trace. Without the extra, tracing is off."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.observe.receivers import receiver

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.engine.engine import Engine
from duetime.node.wiring import build_deliverers
from duetime.observe import tracing
from duetime.sdk import AsyncClient
from duetime.sdk.worker import Job, Worker, WorkerConfig
from duetime.store import Store, store_from_url

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
GIVEN = f"00-{TRACE}-00f067aa0ba902b7-01"
BASE = "http://127.0.0.1"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", lambda: provider.get_tracer("duetime"))
    monkeypatch.setattr(tracing, "ENABLED", True)
    yield exporter
    provider.shutdown()


@pytest.fixture
async def live(store_url: str) -> AsyncIterator[tuple[Store, httpx.AsyncClient, Settings]]:
    """A dev-mode app and a running engine over a real store (real clock)."""
    settings = Settings(poll_interval_seconds=0.05, node_id="trace-node")
    store = store_from_url(store_url)
    await store.open()
    await store.migrate()
    engine = Engine(store, settings, build_deliverers(settings, store))
    await engine.start()
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield store, client, settings
    finally:
        await engine.stop(2)
        await store.close()


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for item in exporter.get_finished_spans():
        found.setdefault(item.name, []).append(item)
    return found


def completed(exporter: InMemorySpanExporter) -> Any:
    async def check() -> bool:
        return "duetime.task.complete" in by_name(exporter)

    return check


async def wait_for(check: Any, what: str, within: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_webhook_gets_the_trace_and_every_span_is_in_it(
    live: tuple[Store, httpx.AsyncClient, Settings], spans: InMemorySpanExporter
) -> None:
    store, api, _ = live
    with receiver() as (base, got):
        made = await api.post(
            "/v1/tasks",
            json={"target": {"type": "http", "url": base + "/ok"}, "payload": {"n": 1}},
            headers={"traceparent": GIVEN},
        )
        assert made.status_code == 201, made.text
        task_id = made.json()["id"]

        async def done() -> bool:
            return (await api.get(f"/v1/tasks/{task_id}")).json()["status"] == "succeeded"

        await wait_for(done, "the delivery")
        await wait_for(completed(spans), "the completion span")  # written just after the row
        (request,) = got.on("/ok")
    found = by_name(spans)
    (create,) = found["duetime.task.create"]
    (deliver,) = found["duetime.task.deliver"]
    assert create.parent is not None and create.parent.span_id == int("00f067aa0ba902b7", 16)
    # The webhook request carries the delivery span's context: the receiver joins the trace.
    header = request["headers"]["traceparent"]
    assert header == f"00-{TRACE}-{deliver.context.span_id:016x}-01"
    # Stored: the task's context is the create span's, and every later span descends from it.
    stored = await store.task_get("default", task_id)
    assert stored is not None
    assert stored.traceparent == f"00-{TRACE}-{create.context.span_id:016x}-01"
    for name in ("duetime.task.ready", "duetime.task.deliver", "duetime.task.complete"):
        (item,) = found[name]
        assert item.context.trace_id == int(TRACE, 16), name
        assert item.parent is not None and item.parent.span_id == create.context.span_id, name
        assert item.attributes is not None and item.attributes["duetime.task_id"] == task_id
    (complete,) = found["duetime.task.complete"]
    assert complete.attributes is not None
    assert complete.attributes["duetime.outcome"] == "succeeded"


async def test_dead_letter_span_is_an_error(
    live: tuple[Store, httpx.AsyncClient, Settings], spans: InMemorySpanExporter
) -> None:
    _, api, _ = live
    with receiver() as (base, _got):
        made = await api.post(
            "/v1/tasks",
            json={"target": {"type": "http", "url": base + "/gone"}},
            headers={"traceparent": GIVEN},
        )
        task_id = made.json()["id"]

        async def done() -> bool:
            return (await api.get(f"/v1/tasks/{task_id}")).json()["status"] == "failed"

        await wait_for(done, "the dead letter")
        await wait_for(completed(spans), "the completion span")
    (complete,) = by_name(spans)["duetime.task.complete"]
    assert complete.status.status_code.name == "ERROR"
    assert complete.attributes is not None and complete.attributes["duetime.failure_class"] == "4xx"


async def test_worker_job_carries_the_trace(
    live: tuple[Store, httpx.AsyncClient, Settings], spans: InMemorySpanExporter
) -> None:
    _, api, _ = live
    made = await api.post(
        "/v1/tasks",
        json={"name": "traced", "queue": "tq", "target": {"type": "worker"}},
        headers={"traceparent": GIVEN},
    )
    assert made.status_code == 201, made.text
    seen: list[Job] = []
    transport = api._transport  # the same in-process app
    client = AsyncClient(BASE, "unused-in-dev-mode", transport=transport)
    worker = Worker(
        client,
        queues=["tq"],
        worker_id="w-trace",
        config=WorkerConfig(wait_seconds=0.2, ack_flush_seconds=0.001, final_flush_seconds=2),
    )

    @worker.handler("traced")
    async def traced(job: Job) -> dict[str, str]:
        seen.append(job)
        return {"ok": "yes"}

    logging.getLogger("httpx").setLevel(logging.NOTSET)
    await asyncio.wait_for(worker.run(until_empty=True), 20)
    # A running worker silences httpx's one INFO line per request (warnings stay).
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    await wait_for(completed(spans), "the completion span")
    (job,) = seen
    (create,) = by_name(spans)["duetime.task.create"]
    assert job.traceparent == f"00-{TRACE}-{create.context.span_id:016x}-01"
    found = by_name(spans)
    (lease,) = found["duetime.task.lease"]
    (complete,) = found["duetime.task.complete"]
    assert lease.context.trace_id == complete.context.trace_id == int(TRACE, 16)


async def test_without_a_provider_the_given_traceparent_is_kept(
    live: tuple[Store, httpx.AsyncClient, Settings],
) -> None:
    """Tracing off (no tracer provider): the task keeps the traceparent it was given, which
    still reaches the webhook and the worker."""
    assert tracing.ENABLED is False
    store, api, _ = live
    made = await api.post(
        "/v1/tasks",
        json={"queue": "plain", "target": {"type": "worker"}},
        headers={"traceparent": GIVEN.upper()},
    )
    stored = await store.task_get("default", made.json()["id"])
    assert stored is not None and stored.traceparent == GIVEN
    bad = await api.post(
        "/v1/tasks",
        json={"queue": "plain", "target": {"type": "worker"}},
        headers={"traceparent": "00-zz-yy-01"},
    )
    assert bad.status_code == 201  # W3C: an invalid traceparent is ignored, not refused
    stored = await store.task_get("default", bad.json()["id"])
    assert stored is not None and stored.traceparent is None
    leased = await api.post(
        "/v1/queues/plain/lease", json={"max_tasks": 10, "wait_seconds": 0, "worker_id": "w1"}
    )
    assert leased.status_code == 200, leased.text
    by_task = {item["task"]["id"]: item["traceparent"] for item in leased.json()["leases"]}
    assert by_task == {made.json()["id"]: GIVEN, bad.json()["id"]: None}


async def test_without_tracing_requests_ask_opentelemetry_nothing(
    live: tuple[Store, httpx.AsyncClient, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tracing off: the app's requests never look up OpenTelemetry's global providers (FastAPI's
    own instrumentation, from 0.165, asked for all three on every request to find none)."""
    from opentelemetry import _logs, metrics, trace

    asked: list[str] = []
    for module, name in ((trace, "get_tracer_provider"), (metrics, "get_meter_provider")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda real=real, name=name: asked.append(name) or real())
    real_logs = _logs.get_logger_provider
    monkeypatch.setattr(
        _logs, "get_logger_provider", lambda: asked.append("get_logger_provider") or real_logs()
    )
    assert tracing.ENABLED is False
    _, api, _ = live
    made = await api.post("/v1/tasks", json={"queue": "plain", "target": {"type": "worker"}})
    assert made.status_code == 201, made.text
    assert (await api.get(f"/v1/tasks/{made.json()['id']}")).status_code == 200
    assert asked == []


def test_without_the_extra_tracing_stays_off() -> None:
    """The SDK missing (OpenTelemetry's API alone comes with FastAPI): setup leaves tracing
    off, even with an OTLP endpoint set, and the helpers do nothing."""
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"
        "import os; os.environ['OTEL_EXPORTER_OTLP_ENDPOINT'] = 'http://127.0.0.1:1'\n"
        "from duetime.observe import tracing\n"
        "assert tracing.setup() is False and tracing.ENABLED is False\n"
        "with tracing.span('x') as s: assert s is None\n"
        "tracing.record('x', None, None, None)\n"
        "assert tracing.traceparent_of(None) is None\n"
        "print('off')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "off", done.stderr
    assert "duetime[otel] is not installed" in done.stderr


def test_setup_without_a_destination_leaves_tracing_off() -> None:
    code = (
        "import os; os.environ.pop('OTEL_EXPORTER_OTLP_ENDPOINT', None)\n"
        "from duetime.observe import tracing\n"
        "assert tracing.setup() is False and tracing.ENABLED is False\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert tracing.setup() is True and tracing.ENABLED is True\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
