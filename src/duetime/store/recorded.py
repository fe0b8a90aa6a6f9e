"""What a completion may record, made so above the drivers: both stores keep exactly this.

A completion carries outside text — a worker's ``fail`` error and logs, a webhook reply's
snippet, a worker's or receiver's result — and numbers computed from stored values. PostgreSQL
refuses a NUL in ``text``, an out-of-range ``integer`` or interval; SQLite keeps the NUL, turns a
NaN into NULL and refuses an integer past 64 bits. Left to the drivers, one such completion makes
a whole batch fail on one store and not the other. :func:`recordable` is applied by both stores
to every completion before they write it, so content can never be why a completion cannot be
recorded, and both stores record (and answer) the same thing.

Text goes through :func:`duetime.text.clean` (the one place that cleans recorded outside text).
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import orjson

from duetime.retry import MAX_BACKOFF_SECONDS, MAX_RETRY_AFTER_SECONDS
from duetime.states import ENDINGS
from duetime.text import clean
from duetime.types import Completion, RetryPolicy, TaskStatus

ERROR_LIMIT_BYTES = 4096
"""An attempt's ``error`` (and the task's ``last_error``) keeps its first 4 KiB."""

RESULT_LIMIT_BYTES = 1024 * 1024
"""A ``result`` is JSON text of at most this size. Webhook replies are cut far earlier (the first
4 KiB of the body, SPEC §4) and worker results at the API's payload limit; this bounds any other
caller."""

LOGS_LIMIT_BYTES = 64 * 1024
"""An attempt's ``logs`` (a worker's, attached on complete or fail) keep their first 64 KiB."""

RESPONSE_LIMIT_BYTES = 4096
"""An attempt's ``response`` (a webhook answer's body) keeps its first 4 KiB."""

WORKER_LIMIT_BYTES = 256
"""A worker id recorded on an attempt."""

MAX_RETRY_DELAY_SECONDS = max(MAX_BACKOFF_SECONDS, MAX_RETRY_AFTER_SECONDS)
"""The longest retry delay a completion may ask for (longer ones are cut to it)."""

_MAX_HTTP_STATUS = 999


def recordable(c: Completion) -> Completion:
    """``c`` with every field made storable alike by both stores; ``c`` itself when it already
    is (the usual case, which costs a few checks and no copy).

    - ``error``, ``worker``, ``logs`` and ``response``: cleaned and cut (see
      :func:`duetime.text.clean`).
    - ``result_json``: kept when it is JSON text within :data:`RESULT_LIMIT_BYTES`; otherwise
      the (cleaned, cut) text itself is recorded as a JSON string.
    - ``http_status`` outside 0-999 is dropped; a non-finite or negative ``duration_ms`` is 0; a
      ``retry_delay_seconds`` is bounded to ``[0, MAX_RETRY_DELAY_SECONDS]`` (NaN = 0) and
      kept only for a ``retrying`` status.
    - ``status`` must be one an attempt can end a task in (``ValueError`` otherwise: a bug of
      the caller, which isolation then records as the task's failure).
    """
    error = c.error if c.error is None else _clean(c.error, ERROR_LIMIT_BYTES)
    worker = c.worker if c.worker is None else _clean(c.worker, WORKER_LIMIT_BYTES)
    result = c.result_json if c.result_json is None else recorded_result(c.result_json)
    logs = c.logs if c.logs is None else recorded_logs(c.logs)
    response = c.response if c.response is None else _clean(c.response, RESPONSE_LIMIT_BYTES)
    status = c.http_status
    if status is not None and not (isinstance(status, int) and 0 <= status <= _MAX_HTTP_STATUS):
        status = None
    duration = c.duration_ms
    if not (isinstance(duration, float | int) and math.isfinite(duration) and duration >= 0):
        duration = 0.0
    if c.status not in ENDINGS:
        raise ValueError(f"an attempt cannot end a task as {c.status!s}")
    delay = c.retry_delay_seconds
    if c.status is not TaskStatus.RETRYING:
        delay = None
    elif delay is None or not 0.0 <= delay <= MAX_RETRY_DELAY_SECONDS:
        delay = 0.0 if delay is None or math.isnan(delay) or delay < 0 else MAX_RETRY_DELAY_SECONDS
    if (
        error == c.error
        and worker == c.worker
        and result == c.result_json
        and status == c.http_status
        and duration == c.duration_ms
        and delay == c.retry_delay_seconds
        and logs == c.logs
        and response == c.response
    ):
        return c
    return Completion(
        task_id=c.task_id,
        lease_id=c.lease_id,
        outcome=c.outcome,
        started_at=c.started_at,
        duration_ms=duration,
        result_json=result,
        error=error,
        http_status=status,
        retry_delay_seconds=delay,
        worker=worker,
        logs=logs,
        response=response,
        status=c.status,
    )


def _clean(text: str, limit_bytes: int) -> str:
    # Most text is short and printable (no control character, no lone surrogate): keep it as is
    # without the regular expression and the encoding (a completion's hot path).
    if len(text) * 4 <= limit_bytes and text.isprintable():
        return text
    return clean(text, limit_bytes)


def recorded_logs(text: str) -> str:
    """A worker's logs as recorded: cleaned and cut to :data:`LOGS_LIMIT_BYTES`."""
    return _clean(text, LOGS_LIMIT_BYTES)


def recorded_result(text: str) -> str:
    """``text`` when it is JSON text (as :mod:`orjson` reads it) within
    :data:`RESULT_LIMIT_BYTES`; otherwise its cleaned first part as a JSON string."""
    if len(text) <= RESULT_LIMIT_BYTES // 4 or len(text.encode("utf-8", "replace")) <= (
        RESULT_LIMIT_BYTES
    ):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            return text
    # Escaping may double the text (a quote or backslash becomes two bytes): cut to half.
    return orjson.dumps(clean(text, RESULT_LIMIT_BYTES // 2 - 2)).decode()


_POLICY_FIELDS = frozenset(f.name for f in fields(RetryPolicy))


def stored_retry_policy(text: str | bytes) -> RetryPolicy:
    """A task's stored ``retry`` column as a policy, whatever it holds: unknown keys are ignored
    and a column that is not a JSON object gives the default policy. Values are kept as stored —
    :mod:`duetime.retry` copes with any value — so one odd row never makes a read fail."""
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        return RetryPolicy()
    if not isinstance(data, dict):
        return RetryPolicy()
    return RetryPolicy(**{k: v for k, v in data.items() if k in _POLICY_FIELDS})
