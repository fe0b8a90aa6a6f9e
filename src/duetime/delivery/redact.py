"""Broker URLs without their passwords: what the API shows and what errors may say.

A broker target's URL may carry credentials (``amqp://user:password@host/``). duetime keeps the
target as the user gave it (the deliverer needs the password to connect) but never shows the
password: task and schedule responses carry :func:`public_target`, and a deliverer passes every
error it records through :func:`scrub`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

from yarl import URL

__all__ = ["REDACTED", "public_target", "redact_url", "scrub", "secret_of"]

REDACTED = "***"
BROKER_TYPES = frozenset({"amqp", "nats", "redis"})


def secret_of(parsed: URL) -> tuple[str | None, bool]:
    """The secret in a URL's user info, and whether it sits in the user slot: the password, or
    for ``nats://token@host`` the token NATS reads from the user name."""
    if parsed.password is not None:
        return parsed.password, False
    if parsed.scheme in ("nats", "tls") and parsed.user:
        return parsed.user, True
    return None, False


def redact_url(url: str) -> str:
    """``url`` with its secret (a password, or a NATS token) replaced by ``***``."""
    try:
        parsed = URL(url)
        secret, in_user = secret_of(parsed)
    except (ValueError, TypeError):
        return url
    if secret is None:
        return url
    if in_user:
        return str(parsed.with_user(REDACTED))
    return str(parsed.with_password(REDACTED))


def public_target(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """``target`` as the API may show it: a broker URL's password (or token) becomes ``***``."""
    url = target.get("url")
    if target.get("type") in BROKER_TYPES and isinstance(url, str):
        shown = redact_url(url)
        if shown != url:
            return {**target, "url": shown}
    return target


def scrub(text: str, url: str) -> str:
    """``text`` (a broker's error, say) without the secret of ``url`` in any spelling."""
    try:
        password, _ = secret_of(URL(url))
    except (ValueError, TypeError):
        return text
    if password:
        for spelling in {password, quote(password, safe=""), unquote(password)}:
            if spelling:
                # As a whole token only, so a password "p" does not turn "private" into "***rivate".
                token = rf"(?<![A-Za-z0-9]){re.escape(spelling)}(?![A-Za-z0-9])"
                text = re.sub(token, REDACTED, text)
    return text
