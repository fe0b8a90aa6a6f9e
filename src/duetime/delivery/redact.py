"""Targets without their credentials: what every answer, page and log line shows.

A stored target holds its credentials sealed (:mod:`duetime.delivery.sealing`); it is shown with
each sealed value as ``***`` and its fingerprint (:func:`duetime.secrets.sealed.redact`), and
with a credential stored before sealing existed (a row no ``duetime secrets rotate`` has reached
yet) in one of the secret places as ``***``. Deliverers pass the errors and answers they record
through :func:`scrub`, so a receiver that echoes the credential back does not put it in the
store either.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

import orjson

from duetime.delivery.base import Outcome
from duetime.delivery.sealing import is_plain, map_secrets
from duetime.secrets.sealed import REDACTED, SEALED, SHOWN, redact, redact_text

__all__ = [
    "REDACTED",
    "basic_spelling",
    "public_target",
    "redact_url",
    "scrub",
    "scrub_all",
    "scrub_outcome",
    "secrets_in",
    "shown_secret",
]


def shown_secret(value: str) -> str:
    """How the value in a secret place is shown: a sealed value as ``***`` and its fingerprint,
    one shown so already as it is, anything else (a credential stored before sealing) as
    ``***``."""
    if "dtenc" in value and SEALED.search(value):
        return redact_text(value)
    if SHOWN.fullmatch(value):
        return value
    return REDACTED


def public_target(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """``target`` as answers show it (see the module); ``target`` itself when it holds nothing
    to hide."""
    if is_plain(target):
        return target
    shown: Mapping[str, Any] = redact(map_secrets(target, shown_secret))
    return shown


def redact_url(url: str) -> str:
    """``url`` with its credentials (user-info secret, credential query values) shown as in
    :func:`public_target`."""
    return str(public_target({"url": url})["url"])


def _spellings(secret: str) -> set[str]:
    found = {secret, quote(secret, safe=""), unquote(secret)}
    scheme, _, credential = secret.partition(" ")
    if credential and scheme.isalpha():  # "Bearer abc": the token alone too
        found.add(credential)
    return {s for s in found if s}


def scrub_all(text: str, secrets: Iterable[str]) -> str:
    """``text`` without any of ``secrets`` in any spelling (as given, percent-encoded or
    decoded; an ``Authorization``-style value's token alone), each shown as ``***``. A secret is
    replaced as a whole token only, so a password ``p`` does not turn ``private`` into
    ``***rivate``."""
    spellings: set[str] = set()
    for secret in secrets:
        spellings |= _spellings(secret)
    for spelling in sorted(spellings, key=len, reverse=True):
        if spelling in text:
            token = rf"(?<![A-Za-z0-9]){re.escape(spelling)}(?![A-Za-z0-9])"
            text = re.sub(token, REDACTED, text)
    return text


def basic_spelling(user: str, password: str) -> str:
    """The ``Authorization`` value HTTP Basic auth sends for ``user`` and ``password``."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def secrets_in(target: Mapping[str, Any]) -> list[str]:
    """The values in ``target``'s secret places (an opened target: its plain credentials)."""
    found: list[str] = []

    def collect(value: str) -> str:
        found.append(value)
        return value

    map_secrets(target, collect)
    return found


def scrub(text: str, url: str) -> str:
    """``text`` (a broker's error, say) without the credentials of ``url`` in any spelling."""
    return scrub_all(text, secrets_in({"url": url}))


def _scrub_json(text: str | None, secrets: Sequence[str]) -> str | None:
    """A JSON result with ``secrets`` scrubbed from every string in it."""
    if text is None or not secrets:
        return text

    def walk(value: object) -> object:
        if isinstance(value, str):
            return scrub_all(value, secrets)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {scrub_all(str(k), secrets): walk(v) for k, v in value.items()}
        return value

    return orjson.dumps(walk(orjson.loads(text))).decode()


def scrub_outcome(outcome: Outcome, secrets: Sequence[str]) -> Outcome:
    """``outcome`` with none of ``secrets`` (the credentials a delivery sent) in its error,
    answer or result (should the receiver have echoed one)."""
    if not secrets:
        return outcome
    return dataclasses.replace(
        outcome,
        error=None if outcome.error is None else scrub_all(outcome.error, secrets),
        response=None if outcome.response is None else scrub_all(outcome.response, secrets),
        result_json=_scrub_json(outcome.result_json, secrets),
    )
