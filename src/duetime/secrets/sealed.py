"""What a sealed value looks like, and how it is shown: pure text rules, no key needed.

A credential a tenant gives (a target header, a URL's password or token, a credential query
parameter, a named credential) is stored as a *sealed value*, one string::

    dtenc2.<key id>.<digest>.<token>

``key id`` is 8 hex characters naming the key that sealed it (:func:`duetime.secrets.keyring.
key_id`), ``digest`` 16 hex characters of a keyed hash of the plain value (never reversible:
the key is not in the store), and ``token`` the Fernet token of the value, its ``=`` padding
dropped so the whole string is ``[A-Za-z0-9._-]`` and sits unescaped in a URL, a header or JSON.
Values sealed before key rings existed read ``dtenc1.<Fernet token>`` (one key, no digest);
:func:`duetime.secrets.keyring.KeyRing.reseal` turns them into the current form.

Wherever a value may be shown (an API answer, a dashboard page, a log line, a history export), a
sealed value becomes ``***`` followed by its *fingerprint*, the first 8 hex characters of its
digest (``***5f3a09c2``; ``***`` alone for a ``dtenc1`` value): equal fingerprints mean the same
secret, so a user sees that a token changed without ever seeing it. :func:`redact` does that to
any JSON value, wherever the sealed text sits in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "PREFIX",
    "PREFIX_V1",
    "REDACTED",
    "SEALED",
    "SHOWN",
    "contains_sealed",
    "fingerprint_of",
    "key_ids",
    "redact",
    "redact_text",
    "shown",
]

PREFIX = "dtenc2."
"""What a sealed value starts with."""
PREFIX_V1 = "dtenc1."
"""What a value sealed with the single key of earlier versions starts with."""
REDACTED = "***"
"""What a secret is shown as (followed by its fingerprint when it has one)."""
FINGERPRINT_CHARS = 8
"""Hex characters of the digest a fingerprint shows."""

SEALED = re.compile(
    r"dtenc2\.(?P<kid>[0-9a-f]{8})\.(?P<digest>[0-9a-f]{16})\.[A-Za-z0-9_-]+"
    r"|dtenc1\.[A-Za-z0-9_=-]+(?:%3[Dd])*"
)
"""A sealed value inside any text (a ``dtenc1`` token's padding may be percent-encoded)."""


SHOWN = re.compile(r"\*\*\*(?:[0-9a-f]{8})?")
"""A secret as shown (``***``, with its fingerprint when it has one)."""


def shown(digest: str | None) -> str:
    """How a secret with ``digest`` is shown: ``***`` and its fingerprint (``***`` alone for
    none)."""
    return REDACTED + (digest[:FINGERPRINT_CHARS] if digest else "")


def _shown(match: re.Match[str]) -> str:
    return shown(match.group("digest"))


def redact_text(text: str) -> str:
    """``text`` with every sealed value in it shown as ``***`` and its fingerprint."""
    if "dtenc" not in text:
        return text
    return SEALED.sub(_shown, text)


def fingerprint_of(text: str) -> str | None:
    """The fingerprint of the first sealed value in ``text`` (None: none, or a ``dtenc1``)."""
    found = SEALED.search(text)
    if found is None or found.group("digest") is None:
        return None
    return found.group("digest")[:FINGERPRINT_CHARS]


def redact(value: Any) -> Any:
    """``value`` (any JSON value: mappings, lists, strings...) with every sealed value in every
    string shown as ``***`` and its fingerprint. What needs no change is returned as it is, so
    a value without secrets costs one walk and no copy."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] | None = None
        for key, item in value.items():
            changed = redact(item)
            if changed is not item:
                if out is None:
                    out = dict(value)
                out[key] = changed
        return value if out is None else out
    if isinstance(value, list | tuple):
        items = [redact(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items
    return value


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value``: itself, mapping keys and values, list and tuple items, in no
    particular order. One walk with a stack, and the exact types JSON gives tested before the
    ABCs (an ``isinstance`` against ``Mapping`` is the slow test): it runs on every create and
    every push delivery."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or (kind is not dict and isinstance(item, str)):
            yield item
        elif kind is dict or isinstance(item, Mapping):
            stack.extend(item)
            stack.extend(item.values())
        elif kind is list or kind is tuple or isinstance(item, list | tuple):
            stack.extend(item)


def contains_sealed(value: Any) -> bool:
    """Whether any string in ``value`` holds a sealed value (input may not: only the node
    seals, so a value copied from elsewhere can never make it open someone else's secret)."""
    return any("dtenc" in text and SEALED.search(text) for text in _strings(value))


def key_ids(value: Any) -> set[str]:
    """The key ids of the sealed values in ``value`` (``""`` for a ``dtenc1`` value)."""
    found: set[str] = set()
    for text in _strings(value):
        if "dtenc" in text:
            found.update(m.group("kid") or "" for m in SEALED.finditer(text))
    return found
