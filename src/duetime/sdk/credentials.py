"""Named credential calls (``/v1/credentials``): secrets a webhook authenticates with, kept
apart from tasks. Write-only: the server seals the values it is given and answers with the name,
the kind and a fingerprint, never a value. A target uses one with
``http_target(url, credential="billing-api")``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from duetime.sdk._http import _Api, _decoded, _segment
from duetime.sdk.models import Page

__all__ = ["BasicCredential", "Credential", "CredentialCalls", "HeaderCredential"]

_PATH = "/v1/credentials"


class HeaderCredential(BaseModel):
    """A header the webhook carries as given: ``HeaderCredential(header="Authorization",
    value="Bearer ...")``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["header"] = "header"
    header: str
    value: str = Field(repr=False)


class BasicCredential(BaseModel):
    """HTTP Basic auth: ``Authorization: Basic base64(username:password)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["basic"] = "basic"
    username: str
    password: str = Field(repr=False)


class Credential(BaseModel):
    """A named credential as the server shows it: never a value. ``fingerprint`` is ``***``
    and 8 hex characters of a keyed hash of the values (it changes when they do); ``created``
    tells a put that made it from one that replaced it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    kind: str
    fingerprint: str
    created_at: datetime
    updated_at: datetime
    created: bool | None = None


class CredentialCalls(_Api):
    """``PUT``/``GET``/``DELETE /v1/credentials``."""

    async def put_credential(
        self, name: str, credential: HeaderCredential | BasicCredential
    ) -> Credential:
        """Create or replace the credential ``name`` with ``credential``'s values (sealed by the
        server, never shown again). Raises ``ValidationError``, ``Conflict`` (too many)."""
        response = await self._send(
            "PUT", f"{_PATH}/{_segment(name)}", body=credential.model_dump()
        )
        data = _decoded(response)
        data["created"] = response.status_code == 201
        return Credential.model_validate(data)

    async def list_credentials(self) -> Page[Credential]:
        """Every credential of the tenant, by name, in one page."""
        return Page[Credential].model_validate(await self._request("GET", _PATH))

    async def get_credential(self, name: str) -> Credential:
        """One credential (name, kind, fingerprint). Raises ``ApiNotFound``."""
        return Credential.model_validate(await self._request("GET", f"{_PATH}/{_segment(name)}"))

    async def delete_credential(self, name: str) -> None:
        """Delete it; tasks that name it fail their next attempt until it is put again.
        Raises ``ApiNotFound``."""
        await self._request("DELETE", f"{_PATH}/{_segment(name)}")
