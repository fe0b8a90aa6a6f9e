"""OpenTelemetry spans, with the optional extra ``duetime[otel]`` (the SDK). Tracing is on
(:data:`ENABLED`) only once :func:`setup` found the SDK and something to send spans to (a
tracer provider already configured, or ``OTEL_EXPORTER_OTLP_ENDPOINT``); otherwise every call
site skips the work, so a node without the extra — or with it but nowhere to send spans — pays
nothing. (FastAPI itself depends on ``opentelemetry-api``; the API alone does not turn tracing
on.)

One trace per task. A task's trace context is its ``traceparent`` (W3C Trace Context): the one
given at create (``traceparent`` header of ``POST /v1/tasks``), or else, when tracing is on,
the context of the create span itself. It is stored with the task, so every later span of the
task — on any node, in any process — is a child of it:

==========================  ===========================================================
``duetime.task.create``     the API call that created the task
``duetime.task.ready``      from the task's due time to the claim of its attempt: the
                            wait for promotion and a free slot (the due-lag)
``duetime.task.deliver``    a push delivery (its context goes to the webhook as the
                            ``traceparent`` header, so the receiver's spans are children)
``duetime.task.lease``      a lease granted to a pull worker (whose handler gets the
                            task's ``traceparent`` on its job)
``duetime.task.complete``   the attempt's ending as recorded, with outcome and failure
                            class; an error status when the task was dead-lettered
``duetime.promote``         a promoter round (a batch of tasks, not one task's)
==========================  ===========================================================

Spans go to the global tracer provider: configure one as usual (``opentelemetry-instrument``,
or the SDK in code); :func:`setup` installs an OTLP exporter when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and ``opentelemetry-exporter-otlp`` is installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.types import NewTask, TaskCreated

log = logging.getLogger("duetime.tracing")

TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
"""A version-00 W3C ``traceparent`` (all-zero ids are invalid)."""

ENABLED = False
"""Whether spans are made (see the module); call sites test it before doing any tracing work."""

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import Span, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # no OpenTelemetry API at all: tracing stays off
    AVAILABLE = False
else:
    AVAILABLE = True
    _PROPAGATOR = TraceContextTextMapPropagator()

_NOOP: Any = None


def valid_traceparent(value: str | None) -> str | None:
    """``value`` when it is a valid ``traceparent``, else None (W3C: an invalid header is
    ignored, not refused)."""
    if value is None:
        return None
    value = value.strip().lower()
    return value if TRACEPARENT.match(value) else None


def _tracer() -> Any:
    return _trace.get_tracer("duetime")


def _context(traceparent: str | None) -> Any:
    if traceparent is None:
        return None
    return _PROPAGATOR.extract({"traceparent": traceparent})


def _ns(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1e9)


def traceparent_of(span: Any) -> str | None:
    """The ``traceparent`` that makes a remote span a child of ``span`` (None when tracing is
    off or the span does not record)."""
    if not ENABLED or span is None:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=_trace.set_span_in_context(span))
    return carrier.get("traceparent")


@contextlib.contextmanager
def span(
    name: str,
    traceparent: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    start: datetime | None = None,
) -> Iterator[Any]:
    """A span named ``name``, child of ``traceparent`` (a new trace without one), started at
    ``start`` (default now), ended when the block ends. Yields None when tracing is off."""
    if not ENABLED:
        yield _NOOP
        return
    found = _tracer().start_span(
        name,
        context=_context(traceparent),
        attributes=dict(attributes or {}),
        start_time=_ns(start),
    )
    try:
        yield found
    except BaseException as exc:
        found.record_exception(exc)
        found.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        found.end()


def record(
    name: str,
    traceparent: str | None,
    start: datetime | None,
    end: datetime | None,
    attributes: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """A span that already happened, from ``start`` to ``end`` (e.g. the wait of a task from
    its due time to its claim), child of ``traceparent``."""
    if not ENABLED:
        return
    found: Span = _tracer().start_span(
        name,
        context=_context(traceparent),
        attributes=dict(attributes or {}),
        start_time=_ns(start),
    )
    if error is not None:
        found.set_status(Status(StatusCode.ERROR, error[:200]))
    found.end(end_time=_ns(end))


def enable() -> bool:
    """Turn tracing on (to the global tracer provider); False when OpenTelemetry is missing."""
    global ENABLED
    ENABLED = AVAILABLE
    return ENABLED


def setup() -> bool:
    """Turn tracing on when the SDK is installed and spans have somewhere to go: a tracer
    provider configured already (``opentelemetry-instrument duetime serve``, or the program
    embedding duetime), or ``OTEL_EXPORTER_OTLP_ENDPOINT`` with
    ``opentelemetry-exporter-otlp-proto-http`` installed (spans are then sent there in
    batches). Returns whether tracing is on."""
    if not AVAILABLE:
        return False
    try:
        import opentelemetry.sdk.trace  # noqa: F401 - the extra is what turns tracing on
    except ImportError:
        if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            log.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but duetime[otel] is not installed: "
                "tracing is off"
            )
        return False
    if not isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return enable()  # configured already
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp-proto-http is "
            "not installed: tracing is off"
        )
        return False
    name = os.environ.get("OTEL_SERVICE_NAME", "duetime")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _trace.set_tracer_provider(provider)
    return enable()


async def create_traced(
    create: Callable[[list[NewTask]], Awaitable[list[TaskCreated]]],
    new: Sequence[NewTask],
    header: str | None,
) -> list[TaskCreated]:
    """``create(new)`` inside a ``duetime.task.create`` span, each task stamped with its trace
    context: the span's (a child of ``header``) when tracing records, else ``header`` itself when
    it is a valid ``traceparent`` (an invalid one is ignored, as W3C Trace Context says)."""
    given = valid_traceparent(header)
    with span("duetime.task.create", given, {"duetime.tasks": len(new)}) as current:
        stamp = traceparent_of(current) or given
        if stamp is not None:
            new = [dataclasses.replace(t, traceparent=stamp) for t in new]
        created = await create(list(new))
        if current is not None and len(created) == 1:
            task = created[0].task
            current.set_attribute("duetime.task_id", task.id)
            current.set_attribute("duetime.tenant", task.tenant_id)
            current.set_attribute("duetime.queue", task.queue)
        return created
