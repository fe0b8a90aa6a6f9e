"""Which parts of a target are credentials, sealed before the target is stored and opened only to
deliver.

A target's *secret places* (:func:`map_secrets`) are:

* the credential in its URL's user info: the password, or the user name when there is no
  password (``https://TOKEN@host``, ``nats://TOKEN@host``), for every target type whose URL may
  carry one (:data:`~duetime.target_types.SECRET_URL_TYPES`);
* the values of the URL's credential query parameters (:data:`CREDENTIAL_QUERY_KEYS`, any case:
  ``?token=``, ``?sig=``, a Redis URL's ``?password=``...);
* for an ``http`` target, the values of its credential headers: the names in
  :data:`CREDENTIAL_HEADERS` and the ones the target lists in ``secret_headers`` (any case).

:class:`TargetSealer` seals each of them for the tenant with the node's key ring
(:mod:`duetime.secrets.keyring`) when a task, a schedule's template or a notification target is
stored; the deliverers open them right before they send (:meth:`TargetSealer.open`), and every
answer shows them as ``***`` and a fingerprint (:mod:`duetime.delivery.redact`). A target given
with a sealed value in it is refused: only the node seals. A node whose ring lacks the key that
sealed a value fails the attempt (retryable) saying so, and the task waits for a node that has it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from yarl import URL

from duetime.config import Settings
from duetime.errors import ValidationError
from duetime.secrets.keyring import KeyRing, SealError, ring_for
from duetime.secrets.sealed import SEALED, contains_sealed
from duetime.target_types import SECRET_URL_TYPES, TargetType

__all__ = [
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_KEYS",
    "SealError",
    "TargetSealer",
    "is_plain",
    "map_secrets",
    "sealer_for",
    "secret_headers",
    "secret_of",
]

CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "api-key",
        "apikey",
        "x-auth-token",
        "x-access-token",
        "x-token",
        "x-secret",
        "x-webhook-secret",
        "x-csrf-token",
        "private-token",
        "x-vault-token",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "x-functions-key",
    }
)
"""Headers of an ``http`` target that always carry a credential (lower case; docs/security.md)."""

CREDENTIAL_QUERY_KEYS = frozenset(
    {
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth",
        "auth_token",
        "key",
        "api_key",
        "apikey",
        "api-key",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
    }
)
"""URL query parameters whose values are credentials (lower case; docs/security.md)."""

_TOKEN_USER_SCHEMES = frozenset((*TargetType.HTTP.spec.schemes, *TargetType.NATS.spec.schemes))
"""Schemes whose lone user name is a token (``https://TOKEN@host``, ``nats://TOKEN@host``)."""


def secret_of(parsed: URL) -> tuple[str | None, bool]:
    """The credential in a URL's user info, and whether it sits in the user slot: the password,
    or the user name of an ``http(s)``/``nats``/``tls`` URL that has no password."""
    if parsed.password is not None:
        return parsed.password, False
    if parsed.scheme in _TOKEN_USER_SCHEMES and parsed.user:
        return parsed.user, True
    return None, False


def secret_headers(target: Mapping[str, Any]) -> frozenset[str]:
    """The lower-cased header names of an ``http`` target that are secret: the documented ones
    and those it lists in ``secret_headers``."""
    named = target.get("secret_headers")
    if not named:
        return CREDENTIAL_HEADERS
    return CREDENTIAL_HEADERS | {str(n).lower() for n in named}


def _map_url(url: str, fn: Callable[[str], str]) -> str:
    """``url`` with ``fn`` applied to its user-info credential and its credential query values."""
    if "@" not in url and "?" not in url:
        return url
    try:
        parsed = URL(url)
        secret, in_user = secret_of(parsed)
    except (ValueError, TypeError):
        return url
    changed = parsed
    if secret:
        new = fn(secret)
        if new != secret:
            changed = changed.with_user(new) if in_user else changed.with_password(new)
    if parsed.query_string:
        pairs = list(parsed.query.items())
        mapped = [(k, fn(v) if v and k.lower() in CREDENTIAL_QUERY_KEYS else v) for k, v in pairs]
        if mapped != pairs:
            changed = changed.with_query(mapped)
    return url if changed is parsed else str(changed)


_SCALARS = frozenset({int, float, bool, type(None)})


def is_plain(target: Mapping[str, Any]) -> bool:
    """Whether ``target`` certainly holds no credential and no sealed value: no user info,
    query or sealed text in its URL, no headers, no nested value, no sealed text anywhere (the
    common webhook and worker targets, told apart in a few string tests on the create path)."""
    for value in target.values():
        kind = type(value)
        if kind is str:
            if "dtenc" in value:
                return False
        elif kind not in _SCALARS and isinstance(value, Mapping | list | tuple) and value:
            return False  # (the test against Mapping, an ABC, is the slow one: scalars skip it)
    url = target.get("url")
    return not (isinstance(url, str) and ("@" in url or "?" in url))


def map_secrets(target: Mapping[str, Any], fn: Callable[[str], str]) -> Mapping[str, Any]:
    """``target`` with ``fn`` applied to the value in each of its secret places (see the
    module; a bare ``{"url": ...}`` is read as a URL that may carry one); ``target`` itself when
    nothing changed (the common case costs no copy)."""
    out: dict[str, Any] | None = None
    url = target.get("url")
    kind = target.get("type")
    if isinstance(url, str) and (kind is None or kind in SECRET_URL_TYPES):
        mapped = _map_url(url, fn)
        if mapped != url:
            out = {**target, "url": mapped}
    headers = target.get("headers")
    if target.get("type") == TargetType.HTTP.value and isinstance(headers, Mapping) and headers:
        names = secret_headers(target)
        changed = {
            k: fn(v) if isinstance(v, str) and v and k.lower() in names else v
            for k, v in headers.items()
        }
        if changed != headers:
            out = {**(out or target), "headers": changed}
    return target if out is None else out


def _sealed_field(value: Any, path: str) -> str | None:
    """The dotted path of the first string in ``value`` that holds a sealed value."""
    if isinstance(value, str):
        return path if SEALED.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _sealed_field(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _sealed_field(item, f"{path}.{i}")
            if found is not None:
                return found
    return None


NODE = "duetime:node"
"""Whom :meth:`TargetSealer.seal_text` seals for: no tenant (tenant ids hold no ``:``)."""


class TargetSealer:
    """Seals a target's credentials for its tenant, and opens them again, with the key ring
    ``ring`` returns (asked for on first use: a target without credentials needs no key)."""

    def __init__(self, ring: Callable[[], KeyRing]) -> None:
        self._make_ring = ring
        self._ring: KeyRing | None = None

    @property
    def ring(self) -> KeyRing:
        """The key ring (made on first use)."""
        if self._ring is None:
            self._ring = self._make_ring()
        return self._ring

    def seal(self, target: Mapping[str, Any], tenant_id: str) -> Mapping[str, Any]:
        """``target`` as it is stored: each credential sealed for ``tenant_id``. Raises
        :class:`~duetime.errors.ValidationError` (field ``target...``) when the target given
        holds a sealed value already."""
        if is_plain(target):
            return target
        if contains_sealed(target):
            field = _sealed_field(target, "target") or "target"
            raise ValidationError(
                "holds a value sealed by duetime; give the credential itself (it is sealed "
                "when stored and never shown again)",
                field,
            )
        return map_secrets(target, lambda value: self.ring.seal(tenant_id, value))

    def reseal(self, target: Mapping[str, Any], tenant_id: str) -> Mapping[str, Any]:
        """``target`` with every credential sealed with the current key: sealed values of older
        keys sealed again, and credentials stored before they were sealed sealed now (what
        ``duetime secrets rotate`` writes back). Raises :class:`SealError` for a value no key of
        the ring opens."""
        ring = self.ring

        def again(value: str) -> str:
            if "dtenc" in value and SEALED.search(value):
                return ring.reseal(tenant_id, value)
            return ring.seal(tenant_id, value)

        return map_secrets(target, again)

    def open(self, target: Mapping[str, Any], tenant_id: str) -> Mapping[str, Any]:
        """``target`` with its sealed values opened, to deliver it. Raises :class:`SealError`
        when this node's ring cannot open one."""
        if not contains_sealed(target):
            return target
        return map_secrets(target, lambda value: self.ring.open_text(tenant_id, value))

    def open_url(self, url: str, tenant_id: str) -> str:
        """``url`` with its sealed values opened (what a broker deliverer dials). Raises
        :class:`SealError` when this node's ring cannot open one."""
        if "dtenc" not in url:
            return url
        opened: str = map_secrets({"url": url}, lambda v: self.ring.open_text(tenant_id, v))["url"]
        return opened

    def seal_text(self, text: str) -> str:
        """``text`` sealed whole for the node itself, not for a tenant (a signing key's private
        half, a client certificate's key, a held payload's access token)."""
        return self.ring.seal(NODE, text)

    def open_text(self, sealed: str) -> str:
        """What :meth:`seal_text` sealed. Raises :class:`SealError` for text this ring did not
        seal for the node."""
        return self.ring.open(NODE, sealed)


def sealer_for(settings: Settings, *, make_key: bool = True) -> TargetSealer:
    """The node's target sealer, over its key ring (:func:`duetime.secrets.keyring.ring_for`;
    ``make_key=False``: refuse to make a key file where there is none)."""
    return TargetSealer(functools.partial(ring_for, settings, make=make_key))
