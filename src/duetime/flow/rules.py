"""The keyed flow rules a queue (or, for uniqueness, a task) states, as JSON and as values.

One JSON shape serves the API (``PUT /v1/queues/{name}``, a task's ``unique``), the stored
queue row and the answers::

    {"key_limit": {"key": "payload.customer_id", "rate": "10/s", "burst": 20},
     "unique":    {"key": "payload.order_id", "period": "PT1H", "states": ["ready", "running"]},
     "debounce":  {"key": "labels.user", "period": "PT5S", "max_wait": "PT1M"},
     "throttle":  {"key": "name", "rate": "2/s", "burst": 1}}

Keys are expressions (:mod:`duetime.flow.keys`); periods are ISO 8601 durations of elapsed time
(``PT0.5S``, ``PT5M``, ``P1D``, ``P2W``; no months or years, whose length varies); rates are
``<number>/s``, ``/m`` or ``/h`` (or a number: per second). A task's own ``unique`` may give
the key itself as ``key`` instead of an expression as ``key_from``. Every check raises
:class:`~duetime.errors.ValidationError` naming the field (``debounce.max_wait``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from duetime.errors import ValidationError
from duetime.flow.keys import bounded, key_json, parse_key
from duetime.types import DebounceRule, FlowRules, TaskStatus, ThrottleRule, UniqueRule

log = logging.getLogger("duetime.flow")

MAX_RATE = 1_000_000.0
MAX_BURST = 1_000_000
MAX_WINDOW_SECONDS = 366 * 86400.0
"""The longest uniqueness window."""
MAX_DEBOUNCE_SECONDS = 7 * 86400.0
"""The longest debounce period and ``max_wait``."""
MIN_PERIOD_SECONDS = 0.001
DEFAULT_UNIQUE_STATES = tuple(
    s for s in TaskStatus if s not in (TaskStatus.FAILED, TaskStatus.CANCELLED)
)
"""A window holds while its task is on its way or succeeded: a failed or cancelled task frees
its key (as Oban and River do)."""

_DURATION = re.compile(
    r"P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,9}(?:\.\d{1,6})?)S)?)?"
)
_RATE = re.compile(r"\s*(\d{1,9}(?:\.\d{1,9})?)\s*/\s*(s|m|h)\s*")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}
_KINDS = ("key_limit", "unique", "debounce", "throttle")


def _at(field: str, name: str) -> str:
    return f"{field}.{name}" if field else name


def _object(raw: Any, field: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValidationError("must be an object", field=field)
    for name in raw:
        if name not in allowed:
            raise ValidationError(
                f"unknown field {name!r}; one of {', '.join(allowed)}", field=_at(field, name)
            )
    return raw


def parse_duration(raw: Any, field: str, low: float, high: float) -> float:
    """Seconds of an ISO 8601 duration of elapsed time within ``[low, high]``."""
    match = _DURATION.fullmatch(raw) if isinstance(raw, str) else None
    if match is None or raw in ("P", "PT") or raw.endswith("T"):
        raise ValidationError(
            "an ISO 8601 duration of weeks, days, hours, minutes and seconds, e.g. PT0.5S, "
            "PT5M, P1D",
            field=field,
        )
    weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if not low <= total <= high:
        raise ValidationError(
            f"must be between {duration_text(low)} and {duration_text(high)}", field=field
        )
    return total


def duration_text(seconds: float) -> str:
    """The shortest ISO 8601 spelling of ``seconds``: ``P7D``, ``PT12H``, ``PT0.5S``."""
    if seconds != round(seconds):
        return f"PT{seconds:.6f}".rstrip("0").rstrip(".") + "S"
    whole = round(seconds)
    for unit, size in (("D", 86400), ("H", 3600), ("M", 60)):
        if whole and whole % size == 0:
            return f"P{whole // size}D" if unit == "D" else f"PT{whole // size}{unit}"
    return f"PT{whole}S"


def parse_rate(raw: Any, field: str) -> float:
    """Starts (or creates) per second from ``"10/s"``, ``"600/m"``, ``"3600/h"`` or a number."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        rate = float(raw)
    else:
        match = _RATE.fullmatch(raw) if isinstance(raw, str) else None
        if match is None:
            raise ValidationError('a rate is "<number>/s", "/m" or "/h", or a number', field)
        rate = float(match.group(1)) / _PER[match.group(2)]
    if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
        raise ValidationError(f"must be above 0 and at most {MAX_RATE:g}/s", field=field)
    return rate


def rate_text(rate: float) -> str:
    """A rate as the API shows it: per second, or per minute or hour when that is a whole
    number and per second is not (``"10/s"``, ``"1/m"``, ``"90/h"``)."""
    if rate >= 1 or rate == round(rate):
        return f"{rate:g}/s"
    for unit, size in (("m", 60.0), ("h", 3600.0)):
        count = rate * size
        if abs(count - round(count)) < 1e-9 * size:
            return f"{round(count)}/{unit}"
    return f"{rate:g}/s"


def _burst(raw: Any, field: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_BURST:
        raise ValidationError(f"a whole number from 1 to {MAX_BURST}", field=field)
    return raw


def unique_rule(raw: Any, field: str = "unique", *, literal: bool = False) -> UniqueRule:
    """A uniqueness window; ``literal``: a task's own, whose ``key`` is the key itself (or
    ``key_from`` an expression)."""
    names = ("key", "key_from", "period", "states") if literal else ("key", "period", "states")
    doc = _object(raw, field, names)
    terms: tuple[str, ...] = ()
    given: str | None = None
    if literal:
        if ("key" in doc) == ("key_from" in doc):
            raise ValidationError("give key (the key itself) or key_from (an expression)", field)
        if "key" in doc:
            text = doc["key"]
            if not isinstance(text, str) or not 0 < len(text) <= 255:
                raise ValidationError("a key is text of 1-255 characters", _at(field, "key"))
            given = bounded(text)
        else:
            terms = parse_key(doc["key_from"], _at(field, "key_from"))
    elif "key" not in doc:
        raise ValidationError("a key expression is required", field=_at(field, "key"))
    else:
        terms = parse_key(doc["key"], _at(field, "key"))
    if "period" not in doc:
        raise ValidationError("a period is required, e.g. PT1H", field=_at(field, "period"))
    period = parse_duration(
        doc["period"], _at(field, "period"), MIN_PERIOD_SECONDS, MAX_WINDOW_SECONDS
    )
    return UniqueRule(terms, period, _states(doc.get("states"), _at(field, "states")), given)


def _states(raw: Any, field: str) -> tuple[TaskStatus, ...]:
    if raw is None:
        return DEFAULT_UNIQUE_STATES
    if not isinstance(raw, list) or not raw:
        raise ValidationError("a non-empty list of task statuses", field=field)
    known = {s.value: s for s in TaskStatus}
    found: list[TaskStatus] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in known:
            raise ValidationError(
                f"{name!r} is not a task status; one of {', '.join(known)}", f"{field}.{i}"
            )
        if known[name] not in found:
            found.append(known[name])
    return tuple(sorted(found, key=list(TaskStatus).index))


def debounce_rule(raw: Any, field: str = "debounce") -> DebounceRule:
    doc = _object(raw, field, ("key", "period", "max_wait"))
    if "key" not in doc or "period" not in doc:
        missing = "key" if "key" not in doc else "period"
        raise ValidationError(f"{missing} is required", field=_at(field, missing))
    terms = parse_key(doc["key"], _at(field, "key"))
    high = MAX_DEBOUNCE_SECONDS
    period = parse_duration(doc["period"], _at(field, "period"), MIN_PERIOD_SECONDS, high)
    max_wait = period * 10 if "max_wait" not in doc else None
    if max_wait is None:
        max_wait = parse_duration(doc["max_wait"], _at(field, "max_wait"), period, high)
    return DebounceRule(terms, period, min(max_wait, high))


def throttle_rule(raw: Any, field: str = "throttle") -> ThrottleRule:
    doc = _object(raw, field, ("key", "rate", "burst"))
    if "key" not in doc or "rate" not in doc:
        missing = "key" if "key" not in doc else "rate"
        raise ValidationError(f"{missing} is required", field=_at(field, missing))
    terms = parse_key(doc["key"], _at(field, "key"))
    rate = parse_rate(doc["rate"], _at(field, "rate"))
    burst = _burst(doc["burst"], _at(field, "burst")) if "burst" in doc else 1
    return ThrottleRule(terms, rate, burst)


def key_limit(raw: Any, field: str = "key_limit") -> tuple[FlowRules, int | None]:
    """A queue's keyed limits: the rules' key, rate and burst, and ``max_concurrency`` (the
    queue's ``max_concurrency_per_key``; None when not given)."""
    doc = _object(raw, field, ("key", "rate", "burst", "max_concurrency"))
    if "key" not in doc:
        raise ValidationError("a key expression is required", field=_at(field, "key"))
    terms = parse_key(doc["key"], _at(field, "key"))
    if "rate" not in doc and "max_concurrency" not in doc:
        raise ValidationError("give rate (with burst) and/or max_concurrency", field=field)
    rate = parse_rate(doc["rate"], _at(field, "rate")) if "rate" in doc else None
    if "burst" in doc and rate is None:
        raise ValidationError("burst needs rate (it sizes each key's bucket)", _at(field, "burst"))
    burst = _burst(doc["burst"], _at(field, "burst")) if "burst" in doc else None
    most = None
    if "max_concurrency" in doc:
        most = _burst(doc["max_concurrency"], _at(field, "max_concurrency"))
    return FlowRules(key=terms, key_rate=rate, key_burst=burst), most


def flow_rules(doc: Mapping[str, Any]) -> tuple[FlowRules, int | None]:
    """Every rule of ``doc`` (the fields of :data:`_KINDS` it holds; None values are left
    out), and the key limit's ``max_concurrency``."""
    rules, most = FlowRules(), None
    if doc.get("key_limit") is not None:
        rules, most = key_limit(doc["key_limit"])
    return (
        FlowRules(
            key=rules.key,
            key_rate=rules.key_rate,
            key_burst=rules.key_burst,
            unique=None if doc.get("unique") is None else unique_rule(doc["unique"]),
            debounce=None if doc.get("debounce") is None else debounce_rule(doc["debounce"]),
            throttle=None if doc.get("throttle") is None else throttle_rule(doc["throttle"]),
        ),
        most,
    )


def unique_json(rule: UniqueRule) -> dict[str, Any]:
    out: dict[str, Any] = (
        {"key": rule.literal} if rule.literal is not None else {"key": key_json(rule.key)}
    )
    out["period"] = duration_text(rule.period_seconds)
    out["states"] = [s.value for s in rule.states]
    return out


def flow_document(rules: FlowRules, max_concurrency_per_key: int | None) -> dict[str, Any]:
    """``rules`` as JSON (the shape :func:`flow_rules` reads; absent rules are null)."""
    key_limit_doc: dict[str, Any] | None = None
    if rules.key:
        key_limit_doc = {"key": key_json(rules.key)}
        if rules.key_rate is not None:
            key_limit_doc["rate"] = rate_text(rules.key_rate)
        if rules.key_burst is not None:
            key_limit_doc["burst"] = rules.key_burst
        if max_concurrency_per_key is not None:
            key_limit_doc["max_concurrency"] = max_concurrency_per_key
    d, t = rules.debounce, rules.throttle
    return {
        "key_limit": key_limit_doc,
        "unique": None if rules.unique is None else unique_json(rules.unique),
        "debounce": None
        if d is None
        else {
            "key": key_json(d.key),
            "period": duration_text(d.period_seconds),
            "max_wait": duration_text(d.max_wait_seconds),
        },
        "throttle": None
        if t is None
        else {"key": key_json(t.key), "rate": rate_text(t.rate), "burst": t.burst},
    }


def stored_rules(doc: Mapping[str, Any] | None) -> FlowRules:
    """The rules of a stored queue row's document; a document no release reads (hand-edited)
    is logged and read as no rules, so a queue stays readable."""
    if not doc:
        return FlowRules()
    try:
        return flow_rules(doc)[0]
    except ValidationError as exc:
        log.warning("a queue's stored flow rules cannot be read, ignored: %s", exc)
        return FlowRules()
