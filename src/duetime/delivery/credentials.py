"""Named credentials (``/v1/credentials``): what each kind holds, how it is sealed, and the
header it adds to a webhook.

A credential is one of:

* ``header``: ``{"kind": "header", "header": "Authorization", "value": "Bearer ..."}``, a header
  the webhook carries as given;
* ``basic``: ``{"kind": "basic", "username": "...", "password": "..."}``, HTTP Basic auth.

Its values are sealed for the tenant as one sealed value (:func:`seal_credential`): the store
keeps that, answers show the name, the kind and the fingerprint. A target names it with
``"auth": {"credential": "<name>"}``; the webhook deliverer asks the delivery's
:class:`~duetime.delivery.base.CredentialSource` for it when it sends (the dispatcher's is a
short per-tenant cache, :class:`duetime.engine.credential_cache.CredentialCache`), opens it and
adds its header, replacing a target header of the same name. A credential that does not exist
fails the attempt without a retry, naming it: put it, then replay the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from duetime.delivery.redact import basic_spelling
from duetime.secrets.keyring import KeyRing
from duetime.types import Credential

__all__ = [
    "KINDS",
    "credential_header",
    "credential_values",
    "seal_credential",
]

KINDS = ("header", "basic")
"""The kinds of named credential."""


def seal_credential(ring: KeyRing, tenant_id: str, values: Mapping[str, Any]) -> str:
    """The one sealed value a credential's ``values`` (its kind and fields, as the API checked
    them) are stored as."""
    return ring.seal(tenant_id, orjson.dumps(dict(values), option=orjson.OPT_SORT_KEYS).decode())


def credential_values(ring: KeyRing, found: Credential) -> dict[str, Any]:
    """The plain values of a stored credential. Raises
    :class:`~duetime.secrets.keyring.SealError` when the ring cannot open it."""
    values = orjson.loads(ring.open(found.tenant_id, found.secret))
    assert isinstance(values, dict)
    return values


def credential_header(values: Mapping[str, Any]) -> tuple[str, str]:
    """The header (name, value) a credential's plain values add to a webhook."""
    if values.get("kind") == "basic":
        return "Authorization", basic_spelling(str(values["username"]), str(values["password"]))
    return str(values["header"]), str(values["value"])
