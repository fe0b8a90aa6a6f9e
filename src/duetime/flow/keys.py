"""Key expressions: the one small language every keyed rule names a task's key in (keyed rate
and concurrency limits, uniqueness windows, debounce, throttle).

A key is one term, or a list of up to :data:`MAX_TERMS` terms:

- ``name``: the task's name;
- ``concurrency_key``: its concurrency key;
- ``labels.<key>``: the value of one label (everything after ``labels.`` is the label's key);
- ``payload``: the whole payload;
- ``payload.<k1>.<k2>…``: the value at that path of object keys in the payload (each key
  ``A-Z a-z 0-9 _ -``, not all digits; a path never looks into arrays), as the task list's
  payload filter reads paths.

Its value: a string is itself; any other JSON value is its canonical JSON (object keys sorted:
``{"a":1,"b":2}`` whatever order the payload had). A term has no value when the task has no
name, the label, the path or a key on it is absent, or the value is JSON null. One term gives
its value, or no key; several give the canonical JSON array of their values (null for those
without one), or no key when none has one. A value of ``""`` is no key. A key longer than
:data:`MAX_KEY_BYTES` bytes of UTF-8 (or holding text no store keeps: NUL, a lone surrogate)
is ``sha256:`` and its hex digest, so an index entry stays small.

A key is evaluated once, when the task is created (:func:`evaluate`), and stored with the
task or in the rule's ledger: a claim never evaluates an expression.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from duetime.errors import ValidationError

MAX_TERMS = 4
MAX_KEY_BYTES = 200
MAX_TERM_CHARS = 300
_PAYLOAD_KEY = re.compile(r"(?=.{1,64}$)[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*")
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}")
_MISSING = object()

Getter = Callable[["KeySource"], Any]
"""Reads one term's value from a task (``_MISSING`` when it has none)."""


class KeySource:
    """What a key is read from: a task being created (its payload parsed once, on demand)."""

    __slots__ = ("_payload", "concurrency_key", "labels", "name", "payload_json")

    def __init__(
        self,
        name: str | None,
        labels: Mapping[str, str],
        payload_json: str,
        concurrency_key: str | None = None,
    ) -> None:
        self.name = name
        self.labels = labels
        self.payload_json = payload_json
        self.concurrency_key = concurrency_key
        self._payload: Any = _MISSING

    @property
    def payload(self) -> Any:
        if self._payload is _MISSING:
            self._payload = orjson.loads(self.payload_json)
        return self._payload


def _name(source: KeySource) -> Any:
    return source.name


def _concurrency_key(source: KeySource) -> Any:
    return source.concurrency_key


def _whole_payload(source: KeySource) -> Any:
    return source.payload


def _label(key: str) -> Getter:
    def get(source: KeySource) -> Any:
        return source.labels.get(key, _MISSING)

    return get


def _path(keys: tuple[str, ...]) -> Getter:
    def get(source: KeySource) -> Any:
        value = source.payload
        for key in keys:
            if not isinstance(value, dict):
                return _MISSING
            value = value.get(key, _MISSING)
            if value is _MISSING:
                return _MISSING
        return value

    return get


def _term(term: str, field: str) -> Getter:
    """The getter of one term; ``ValidationError`` naming ``field`` for anything else."""
    if term == "name":
        return _name
    if term == "concurrency_key":
        return _concurrency_key
    if term == "payload":
        return _whole_payload
    if term.startswith("labels."):
        key = term.removeprefix("labels.")
        if _LABEL_KEY.fullmatch(key):
            return _label(key)
        raise ValidationError(
            f"{term!r}: a label key is 1-63 of A-Z a-z 0-9 . _ / - (starting with a letter or "
            "digit)",
            field=field,
        )
    if term.startswith("payload."):
        keys = tuple(term.removeprefix("payload.").split("."))
        if all(_PAYLOAD_KEY.fullmatch(key) for key in keys):
            return _path(keys)
        raise ValidationError(
            f"{term!r}: a payload path is object keys of A-Z a-z 0-9 _ - (not all digits), "
            "joined by dots",
            field=field,
        )
    raise ValidationError(
        f"{term!r} is not a key term: use name, concurrency_key, labels.<key>, payload or "
        "payload.<path>",
        field=field,
    )


def parse_key(raw: Any, field: str) -> tuple[str, ...]:
    """The terms of a key expression given as one term or a list of terms (see the module);
    ``ValidationError`` naming ``field`` when it is not one."""
    terms: Sequence[Any] = [raw] if isinstance(raw, str) else raw
    if not isinstance(terms, list) or not 1 <= len(terms) <= MAX_TERMS:
        raise ValidationError(f"a key is one term or a list of 1 to {MAX_TERMS} terms", field=field)
    for i, term in enumerate(terms):
        where = field if isinstance(raw, str) else f"{field}.{i}"
        if not isinstance(term, str) or not 0 < len(term) <= MAX_TERM_CHARS:
            raise ValidationError(f"a key term is text of 1-{MAX_TERM_CHARS} characters", where)
        _term(term, where)
    return tuple(terms)


def key_json(terms: tuple[str, ...]) -> str | list[str]:
    """A key expression as the API shows it: one term as text, several as a list."""
    return terms[0] if len(terms) == 1 else list(terms)


@functools.lru_cache(maxsize=4096)
def _getters(terms: tuple[str, ...]) -> tuple[Getter, ...]:
    return tuple(_term(term, "key") for term in terms)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def evaluate(terms: tuple[str, ...], source: KeySource) -> str | None:
    """The key of ``source`` under ``terms`` (parsed by :func:`parse_key`), or None when it
    has none (see the module)."""
    values = [get(source) for get in _getters(terms)]
    present = [v for v in values if v is not _MISSING and v is not None]
    if not present:
        return None
    if len(terms) == 1:
        key = _text(present[0])
    else:
        plain = [None if v is _MISSING else v for v in values]
        key = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS).decode()
    return bounded(key)


def bounded(key: str) -> str | None:
    """``key`` as it is stored: None for ``""``, a digest when over :data:`MAX_KEY_BYTES`."""
    if not key:
        return None
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no store can keep it as text
        raw = key.encode("utf-8", "surrogatepass")
    else:
        if len(raw) <= MAX_KEY_BYTES and "\x00" not in key:
            return key
    return "sha256:" + hashlib.sha256(raw).hexdigest()
