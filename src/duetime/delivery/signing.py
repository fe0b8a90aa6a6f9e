"""Standard Webhooks signatures (https://www.standardwebhooks.com/), exactly as the spec says.

A signature is ``v1,<base64 HMAC-SHA256(key, "<msg_id>.<timestamp>.<body>")>`` where ``key`` is the
base64-decoded part of a ``whsec_<base64>`` secret and ``timestamp`` is unix seconds. During a
secret rotation a message carries one signature per live secret, separated by spaces, and a
receiver accepts it when any one matches.

Signing is on the delivery hot path, so each secret's keyed HMAC state is computed once and copied
per message (about a third cheaper than keying a fresh HMAC every time).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence

from duetime.auth import SIGNING_SECRET_PREFIX

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"

MAX_LIVE_SECRETS = 3
"""A tenant has at most this many live secrets (the API refuses a rotation beyond it), and a
message carries at most this many signatures, from the newest secrets: the header stays small
whatever the store holds."""

DEFAULT_TOLERANCE_SECONDS = 300
"""How far ``webhook-timestamp`` may stray from a receiver's clock (the spec says 5 minutes)."""

_MAX_CACHED_KEYS = 10_000
_keyed: dict[str, hmac.HMAC] = {}


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret (the prefix is optional, padding is not required).

    Raises :class:`ValueError` for a secret that is not base64 or decodes to nothing.
    """
    text = secret.removeprefix(SIGNING_SECRET_PREFIX)
    try:
        # Same leniency as the reference library: unpadded base64 is fine.
        key = base64.b64decode(text + "==")
    except binascii.Error as exc:
        raise ValueError("signing secret is not valid base64") from exc
    if not key:
        raise ValueError("signing secret is empty")
    return key


def _keyed_hmac(secret: str) -> hmac.HMAC:
    state = _keyed.get(secret)
    if state is None:
        if len(_keyed) >= _MAX_CACHED_KEYS:
            _keyed.clear()
        state = _keyed[secret] = hmac.new(secret_key(secret), digestmod=hashlib.sha256)
    return state


def _signature(secret: str, prefix: bytes, body: bytes) -> bytes:
    mac = _keyed_hmac(secret).copy()
    mac.update(prefix)
    mac.update(body)
    return mac.digest()


def sign(msg_id: str, timestamp: int, body: bytes, secrets: Sequence[str]) -> str:
    """The ``webhook-signature`` header value: ``v1,<b64>`` per secret, space separated.

    ``secrets`` (oldest first, as the store lists them) must not be empty; only the newest
    :data:`MAX_LIVE_SECRETS` sign. Raises :class:`ValueError` for an invalid secret.
    """
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    secrets = secrets[-MAX_LIVE_SECRETS:]
    prefix = f"{msg_id}.{timestamp}.".encode()
    if len(secrets) == 1:
        digest = _signature(secrets[0], prefix, body)
        return "v1," + binascii.b2a_base64(digest, newline=False).decode()
    return " ".join(
        "v1," + binascii.b2a_base64(_signature(s, prefix, body), newline=False).decode()
        for s in secrets
    )


def verify(
    msg_id: str,
    timestamp: int,
    body: bytes,
    signature_header: str,
    secrets: Sequence[str],
    *,
    now: float | None = None,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """Whether any ``v1`` signature in ``signature_header`` matches any of ``secrets``.

    When ``now`` (unix seconds) is given, a ``timestamp`` more than ``tolerance_seconds`` away
    from it fails too, as the spec asks receivers to check (replay protection). Comparisons are
    constant-time. Malformed signature entries are ignored; an invalid secret raises
    :class:`ValueError`.
    """
    if now is not None and abs(now - timestamp) > tolerance_seconds:
        return False
    given: list[bytes] = []
    for entry in signature_header.split():
        version, _, encoded = entry.partition(",")
        if version != "v1" or not encoded:
            continue
        try:
            given.append(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            continue
    if not given:
        return False
    prefix = f"{msg_id}.{timestamp}.".encode()
    matched = False
    for secret in secrets:
        expected = _signature(secret, prefix, body)
        for candidate in given:
            # No early exit: time must not depend on which secret or entry matched.
            matched |= hmac.compare_digest(expected, candidate)
    return matched
