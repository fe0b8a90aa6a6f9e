"""Oversized request headers are refused with 431 before auth or routing."""

from __future__ import annotations

import httpx
from api_helpers import assert_problem


async def test_a_huge_authorization_header_is_431(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/tasks", headers={"Authorization": "Bearer " + "x" * 2_000_000})
    body = assert_problem(resp, 431)
    assert "bytes" in str(body["detail"])


async def test_thousands_of_headers_are_431(client: httpx.AsyncClient) -> None:
    headers = [(f"x-h{i}", "v") for i in range(5000)]
    resp = await client.get("/healthz", headers=headers)
    assert_problem(resp, 431)


async def test_ordinary_headers_pass(api: httpx.AsyncClient) -> None:
    headers = {f"x-h{i}": "v" * 50 for i in range(50)}
    assert (await api.get("/v1/tasks", headers=headers)).status_code == 200
