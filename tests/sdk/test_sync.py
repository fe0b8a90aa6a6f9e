"""Client, the blocking facade: same calls as AsyncClient, inside or outside a running loop."""

from __future__ import annotations

import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import duetime
from duetime import errors
from duetime.sdk import ApiNotFound, AsyncClient, Client, worker_target

TASK = {
    "id": "t1",
    "status": "ready",
    "target": {"type": "worker"},
    "run_at": "2030-01-01T00:00:00Z",
    "created_at": "2030-01-01T00:00:00Z",
    "updated_at": "2030-01-01T00:00:00Z",
}


def fake_api(request: httpx.Request) -> httpx.Response:
    """Tasks t1..t5 listed two per page; an unknown id is a 404 problem."""
    path = request.url.path
    if request.method == "POST" and path == "/v1/tasks":
        return httpx.Response(201, json=TASK)
    if path == "/v1/tasks":
        start = int(request.url.params.get("cursor") or 0)
        ids = [f"t{i}" for i in range(start + 1, min(start + 2, 5) + 1)]
        cursor = str(start + 2) if start + 2 < 5 else None
        return httpx.Response(
            200, json={"items": [{**TASK, "id": i} for i in ids], "next_cursor": cursor}
        )
    if path == "/v1/tasks/t1":
        return httpx.Response(200, json=TASK)
    return httpx.Response(
        404,
        json={
            "type": "urn:duetime:problem:not-found",
            "title": "Not found",
            "status": 404,
            "detail": "no such task",
            "instance": path,
        },
    )


def make_client() -> Client:
    return Client("http://duetime.test", "k", transport=httpx.MockTransport(fake_api))


def exercise(client: Client) -> None:
    assert client.create_task(target=worker_target()).id == "t1"
    assert client.get_task("t1").status == "ready"
    assert [t.id for t in client.iter_tasks(page_size=2)] == ["t1", "t2", "t3", "t4", "t5"]
    assert client.list_tasks(limit=2).next_cursor == "2"
    with pytest.raises(errors.NotFound) as caught:
        client.get_task("nope")
    assert isinstance(caught.value, ApiNotFound) and caught.value.status == 404


def test_works_without_a_running_loop() -> None:
    with make_client() as client:
        exercise(client)


async def test_works_inside_a_running_loop() -> None:
    with make_client() as client:
        exercise(client)


def test_is_exported_from_the_package() -> None:
    assert duetime.Client is Client
    assert duetime.AsyncClient is AsyncClient
    assert {"AsyncClient", "Client"} <= set(duetime.__all__)


def test_every_public_async_call_has_a_typed_sync_twin() -> None:
    public = {
        name
        for name, member in inspect.getmembers(AsyncClient)
        if not name.startswith("_")
        and (inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member))
        and name != "aclose"
    }
    assert public, "AsyncClient has no calls?"
    missing = sorted(name for name in public if name not in vars(Client))
    assert missing == [], f"add `name = _blocking(AsyncClient.name)` to Client for {missing}"
    assert Client.get_task.__doc__ == AsyncClient.get_task.__doc__


def test_calls_without_a_typed_line_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    async def echo(self: AsyncClient, value: int) -> int:
        return value * 2

    async def count(self: AsyncClient, n: int) -> Any:
        for i in range(n):
            yield i

    monkeypatch.setattr(AsyncClient, "echo_twice", echo, raising=False)
    monkeypatch.setattr(AsyncClient, "count_to", count, raising=False)
    with make_client() as client:
        assert client.echo_twice(21) == 42
        assert list(client.count_to(3)) == [0, 1, 2]
        assert client.base_url == "http://duetime.test"
        with pytest.raises(AttributeError):
            client._not_there  # noqa: B018


def test_close_is_idempotent_and_stops_the_thread() -> None:
    client = make_client()
    thread = client._thread
    assert thread.is_alive()
    client.close()
    client.close()
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        client.get_task("t1")


def test_leaving_an_iteration_early_closes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []

    async def endless(self: AsyncClient) -> Any:
        try:
            while True:
                yield await self.get_task("t1")
        finally:
            closed.append(True)

    monkeypatch.setattr(AsyncClient, "endless", endless, raising=False)
    with make_client() as client:
        for task in client.endless():
            assert task.id == "t1"
            break
        assert closed == [True]
        assert client.get_task("t1").id == "t1"


def test_calls_from_many_threads_share_one_client() -> None:
    with make_client() as client, ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: client.get_task("t1").id, range(40)))
    assert results == ["t1"] * 40


def test_an_unclosed_client_is_cleaned_up_when_collected() -> None:
    import gc

    client = make_client()
    thread: threading.Thread = client._thread
    del client
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()
