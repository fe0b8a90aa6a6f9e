"""Reading the body of ``POST /v1/tasks/batch`` per batch rather than per field (and that of
``POST /v1/tasks`` as one such item).

The batch route used to validate its body with pydantic (``TaskBatchCreate``) and then build a
``NewTask`` from each model: ~22 µs of node CPU per task, the largest share of a batch create
(``docs/benchmarks.md``, ninth session). Most batches are plain — a worker or webhook target, a
payload, a run time, a name, a queue, labels — and for those the checks are a few comparisons.

:func:`read_batch` therefore parses the body once with orjson and accepts each plain item with a
check written out here (:func:`_plain_item`) that agrees with the request models of
:mod:`duetime.api.schemas` field by field; an item using anything else (``retry``,
``depends_on``, ``delay_seconds``, ``idempotency_key``, another target type, target headers...)
is validated alone by pydantic. The fast check never decides an error: at the first doubt —
a body orjson cannot read, an item that fails, numbers orjson reads differently from pydantic —
the whole body goes through ``TaskBatchCreate`` as before, so every refusal is the one pydantic
gives, naming ``tasks.N.<field>`` (``tests/unit/test_batch_body.py`` compares both paths;
why this is written by hand: ``docs/adr/0006-plain-batch-bodies.md``).
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

import orjson
import pydantic
from pydantic_core import PydanticCustomError

from duetime.api.fields import parse_rfc3339, url_has_scheme
from duetime.api.schemas import (
    LABEL_KEY,
    MAX_BATCH,
    MAX_LABELS,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_NAME,
    TaskCreate,
)
from duetime.text import is_clean

Plain = tuple[
    dict[str, Any],  # target, as the model dumps it
    Any,  # payload
    str | None,  # name
    str,  # queue
    datetime | None,  # run_at
    int,  # priority
    float,  # timeout_seconds
    dict[str, str],  # labels
    str | None,  # concurrency_key
]
"""An item the fast check accepted, in the fields :meth:`TaskBuilder.new_plain` takes."""

_PLAIN_FIELDS = frozenset(
    {
        "name",
        "queue",
        "run_at",
        "target",
        "payload",
        "priority",
        "timeout_seconds",
        "labels",
        "concurrency_key",
    }
)
# The patterns of schemas.QueueName and LabelKey (fullmatch: ``$`` would also match before a
# final newline, which pydantic's regex does not).
_QUEUE = re.compile(QUEUE_NAME)
_LABEL_KEY = re.compile(LABEL_KEY)
_HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
_HTTP_FIELDS = frozenset({"type", "url", "method", "headers"})
# orjson reads an integer beyond 64 bits as a float, where pydantic reads an int (and refuses
# it in a payload): a body with a run of 19 digits anywhere takes the full path.
_LONG_DIGITS = re.compile(rb"\d{19}")
_MAX_DEPTH = 64
"""Deeper payloads take the full path: pydantic's JSON parser refuses nesting past its limit
(a few hundred levels), orjson's limit is higher."""
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def parse_batch(raw: bytes) -> list[Plain | TaskCreate] | None:
    """Each item of a batch body, checked: a :data:`Plain` tuple, or the ``TaskCreate`` pydantic
    made of an item that is not plain; None when the body must be read by ``TaskBatchCreate``
    (anything invalid, or anything this reading cannot vouch for)."""
    doc = _loaded(raw)
    if type(doc) is not dict or len(doc) != 1:
        return None
    items = doc.get("tasks")
    if type(items) is not list or not 1 <= len(items) <= MAX_BATCH:
        return None
    out: list[Plain | TaskCreate] = []
    urls: dict[str, bool] = {}  # a batch's items mostly share a URL: each is parsed once
    for item in items:
        found: Plain | TaskCreate | None = _plain_item(item, urls)
        if found is None:
            if type(item) is not dict:
                return None
            try:  # orjson writes back what it read: pydantic sees the item as sent
                found = TaskCreate.model_validate_json(orjson.dumps(item))
            except (pydantic.ValidationError, TypeError):  # TypeError: nested too deep
                return None
        out.append(found)
    return out


def parse_single(raw: bytes) -> Plain | None:
    """The body of ``POST /v1/tasks`` as a :data:`Plain` tuple when it is a plain item (as in a
    batch); None when ``TaskCreate`` must read it (anything else, valid or not)."""
    return _plain_item(_loaded(raw), {})


def _loaded(raw: bytes) -> Any:
    """``raw`` as orjson reads it; None when that reading may differ from pydantic's."""
    if _LONG_DIGITS.search(raw) is not None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _plain_item(item: Any, urls: dict[str, bool]) -> Plain | None:
    """``item`` as a :data:`Plain` tuple when it uses only plain fields and every one is valid
    as ``TaskCreate`` says; None otherwise (never an error)."""
    if type(item) is not dict or not _PLAIN_FIELDS.issuperset(item):
        return None
    target = _target(item.get("target"), urls)
    if target is None:
        return None
    payload = item.get("payload")
    if not _plain_json(payload, 0):
        return None
    name = item.get("name")
    if name is not None and not _text(name, 1, 200):
        return None
    queue = item.get("queue", "default")
    if type(queue) is not str or _QUEUE.fullmatch(queue) is None:
        return None
    run_at = item.get("run_at")
    if run_at is not None:
        run_at = _when(run_at)
        if run_at is None:
            return None
    priority = item.get("priority", 0)
    if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        return None
    timeout = item.get("timeout_seconds", 30.0)
    kind = type(timeout)
    if kind is int:
        timeout = float(timeout)
    elif kind is not float:
        return None
    if not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS:
        return None
    labels = item.get("labels")
    if labels is None:
        if "labels" in item:  # null is refused: labels is not optional
            return None
        labels = {}
    elif not _labels(labels):
        return None
    key = item.get("concurrency_key")
    if key is not None and not _text(key, 1, 255):
        return None
    return (target, payload, name, queue, run_at, priority, timeout, labels, key)


def _target(target: Any, urls: dict[str, bool]) -> dict[str, Any] | None:
    """A worker target, or a webhook target without headers, as its model dumps it. ``urls``:
    whether each URL seen before in this body is a webhook's."""
    if type(target) is not dict:
        return None
    kind = target.get("type")
    if kind == "worker":
        return {"type": "worker"} if len(target) == 1 else None
    if kind != "http" or not _HTTP_FIELDS.issuperset(target):
        return None
    url = target.get("url")
    method = target.get("method", "POST")
    headers = target.get("headers", {})
    if type(url) is not str or len(url) > 2048:
        return None
    usable = urls.get(url)
    if usable is None:
        try:
            usable = urls[url] = url_has_scheme(url, ("http", "https"))
        except ValueError:  # urlsplit's refusal: pydantic's value_error
            usable = urls[url] = False
    if not usable:
        return None
    if type(method) is not str or method not in _HTTP_METHODS:
        return None
    if type(headers) is not dict or headers:
        return None
    return {"type": "http", "url": url, "method": method, "headers": {}}


def _text(value: Any, shortest: int, longest: int) -> bool:
    """A string ``Name`` / ``Key`` / ``LabelValue`` accepts: its length, no control character
    or lone surrogate (``NO_CONTROL`` with ``CleanText``)."""
    return type(value) is str and shortest <= len(value) <= longest and is_clean(value)


def _when(value: Any) -> datetime | None:
    """``run_at`` as ``Rfc3339`` parses it, or None."""
    if type(value) is not str:
        return None
    try:
        return parse_rfc3339(value)
    except PydanticCustomError:
        return None


def _labels(labels: Any) -> bool:
    if type(labels) is not dict or len(labels) > MAX_LABELS:
        return False
    for key, value in labels.items():
        if _LABEL_KEY.fullmatch(key) is None or not _text(value, 0, 256):
            return False
    return True


def _plain_json(value: Any, depth: int) -> bool:
    """Whether ``value`` passes ``finite_json`` and is shallow enough for pydantic's parser."""
    kind = type(value)
    if kind is dict:
        if depth >= _MAX_DEPTH:
            return False
        return all(_plain_json(v, depth + 1) for v in value.values())
    if kind is list:
        if depth >= _MAX_DEPTH:
            return False
        return all(_plain_json(v, depth + 1) for v in value)
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    return True
