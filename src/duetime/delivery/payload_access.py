"""Payloads held by reference (SPEC §3 ``payload_ref``): the tokens that scope reading one.

A task created with ``"payload_held": <JSON>`` keeps that payload in the store, apart from the
task (``payload`` stays null); the task's ``payload_ref`` reads ``duetime:held/<hold id>``. Each
attempt is handed a URL, ``<DUETIME_PUBLIC_URL>/v1/payloads/<task id>?token=<token>`` — a
webhook in the ``duetime-payload-url`` header, a pull worker in its lease's ``payload_url`` — and
``GET`` on it answers the payload. The token is the task id, tenant, attempt number and an expiry
sealed with the node's secret key (:mod:`duetime.delivery.sealing`: nobody can make or alter
one), and it opens the payload only while that attempt is the task's current one and running,
and before :data:`TOKEN_SECONDS` passed: another attempt, a finished one, another task or an
expired token is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

import orjson

from duetime.delivery.sealing import SealError, TargetSealer

__all__ = [
    "HEADER_PAYLOAD_URL",
    "HELD_PREFIX",
    "TOKEN_SECONDS",
    "PayloadGrant",
    "PayloadTokens",
    "TokenError",
    "held_id",
]

HEADER_PAYLOAD_URL = "duetime-payload-url"
HELD_PREFIX = "duetime:held/"
"""How a task's ``payload_ref`` names a payload duetime holds."""
TOKEN_SECONDS = 3600
"""A token's lifetime (it also dies with its attempt)."""


def held_id(payload_ref: str | None) -> str | None:
    """The hold id a ``payload_ref`` names, or None for any other reference."""
    if payload_ref is None or not payload_ref.startswith(HELD_PREFIX):
        return None
    return payload_ref[len(HELD_PREFIX) :] or None


class TokenError(Exception):
    """A payload token that opens nothing (forged, of another node's key, or expired)."""


@dataclass(frozen=True, slots=True)
class PayloadGrant:
    """What a payload token allows: reading task ``task_id``'s (of ``tenant_id``) held payload
    during its attempt ``attempt``, until ``expires`` (unix seconds)."""

    task_id: str
    tenant_id: str
    attempt: int
    expires: int


class PayloadTokens:
    """Makes and opens payload tokens with the node's sealer (made on first use)."""

    def __init__(self, sealer: Callable[[], TargetSealer]) -> None:
        self._factory = sealer
        self._sealer: TargetSealer | None = None

    def _seal(self) -> TargetSealer:
        if self._sealer is None:
            self._sealer = self._factory()
        return self._sealer

    def token(self, task_id: str, tenant_id: str, attempt: int, now: datetime) -> str:
        """A token for attempt ``attempt`` of the task, valid :data:`TOKEN_SECONDS` from
        ``now`` at most."""
        claims = [task_id, tenant_id, attempt, int(now.timestamp()) + TOKEN_SECONDS]
        return self._seal().seal_text(orjson.dumps(claims).decode())

    def url(self, base: str, task_id: str, tenant_id: str, attempt: int, now: datetime) -> str:
        """The URL that reads the payload during the attempt (``base``: the node's public URL,
        or empty for a path)."""
        token = self.token(task_id, tenant_id, attempt, now)
        return f"{base.rstrip('/')}/v1/payloads/{task_id}?token={quote(token, safe='')}"

    def open(self, token: str, now: datetime) -> PayloadGrant:
        """The grant of ``token``; ``TokenError`` when it is not one of ours or expired."""
        try:
            task_id, tenant_id, attempt, expires = orjson.loads(self._seal().open_text(token))
        except (SealError, orjson.JSONDecodeError, ValueError, TypeError):
            raise TokenError("not a payload token of this service") from None
        if now.timestamp() >= expires:
            raise TokenError("the payload token expired")
        return PayloadGrant(str(task_id), str(tenant_id), int(attempt), int(expires))
