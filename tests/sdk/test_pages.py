"""One shape for every SDK listing: a :class:`~duetime.sdk.models.Page` with ``items`` and
``next_cursor``, as the API answers and the CLI prints, read as a sequence of its items."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from duetime import AsyncClient, Client
from duetime.sdk.models import Page

NOW = "2030-01-01T00:00:00Z"
ANSWERS: dict[str, dict[str, Any]] = {
    "/v1/tasks/t1/attempts": {
        "number": 1, "started_at": NOW, "outcome": "succeeded", "finished_at": NOW,
    },
    "/v1/queues": {"name": "mail"},
    "/v1/workers": {"worker_id": "w1", "queues": ["mail"]},
    "/v1/targets": {"origin": "https://example.com", "state": "closed"},
    "/v1/admin/tenants": {"id": "tn1", "name": "acme"},
    "/v1/schedules/s1/upcoming": {"at": NOW},
    "/v1/credentials": {
        "name": "billing-api", "kind": "header", "fingerprint": "***0123abcd",
        "created_at": NOW, "updated_at": NOW,
    },
}  # fmt: skip

CALLS: dict[str, Callable[[AsyncClient], Awaitable[Page[Any]]]] = {
    "/v1/tasks/t1/attempts": lambda c: c.list_attempts("t1"),
    "/v1/queues": lambda c: c.list_queues(),
    "/v1/workers": lambda c: c.list_workers(),
    "/v1/targets": lambda c: c.list_targets(),
    "/v1/admin/tenants": lambda c: c.list_tenants(),
    "/v1/schedules/s1/upcoming": lambda c: c.list_upcoming("s1"),
    "/v1/credentials": lambda c: c.list_credentials(),
}


def _answer(request: httpx.Request) -> httpx.Response:
    item = ANSWERS[request.url.path]
    return httpx.Response(200, json={"items": [item, item]})


@pytest.mark.parametrize("path", sorted(CALLS))
async def test_every_whole_listing_is_a_page(path: str) -> None:
    async with AsyncClient("http://duetime.test", transport=httpx.MockTransport(_answer)) as c:
        page = await CALLS[path](c)
    assert isinstance(page, Page)
    assert len(page) == 2 and page.next_cursor is None
    assert list(page) == list(page.items) and page[1] == page.items[1]
    (first, _) = page
    assert first == page.items[0]
    assert page.to_json()["items"] == [item.model_dump(mode="json") for item in page.items]
    assert set(page.to_json()) == {"items", "next_cursor"}


def test_the_blocking_client_returns_the_same_page() -> None:
    with Client("http://duetime.test", transport=httpx.MockTransport(_answer)) as client:
        page = client.list_attempts("t1")
    assert isinstance(page, Page) and [a.number for a in page] == [1, 1]
