"""Helpers shared by the API tests (imported as ``api_helpers``: pytest puts this directory on
``sys.path``, and the unusual name cannot collide with another test directory's module)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

ADMIN_TOKEN = "test-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass(frozen=True)
class TenantKey:
    id: str
    key_id: str
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


async def make_tenant(client: httpx.AsyncClient, name: str) -> TenantKey:
    """A new tenant (through the admin API) and its first key."""
    resp = await client.post("/v1/admin/tenants", json={"name": name}, headers=ADMIN)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    return TenantKey(id=body["id"], key_id=body["key_id"], api_key=body["api_key"])


def assert_problem(
    resp: httpx.Response, status: int, field: str | None = None
) -> dict[str, object]:
    """The response is an RFC 9457 problem with ``status`` (and, when given, naming ``field``)."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    body = resp.json()
    assert body["status"] == status
    assert str(body["type"]).startswith("urn:duetime:problem:")
    assert body["title"] and body["detail"]
    assert body["instance"] == resp.request.url.path
    if field is not None:
        assert body["field"] == field, body
        assert body["errors"][0]["field"] == field
    return dict(body)


@contextmanager
def case(label: object) -> Iterator[None]:
    """Name the case of a table-driven loop in its assertion failure (one store per test is far
    cheaper than one per case)."""
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"case {label!r}: {exc}") from exc
