"""The SDK's transient-failure retries, its environment defaults and ``Task.created``."""

from __future__ import annotations

import httpx
import pytest
from tests.sdk.test_client import TASK_ID, Recorder, task_json

from duetime.sdk import ApiUnavailable, AsyncClient, Client, TransportError, worker_target

UNAVAILABLE = httpx.Response(
    503, json={"title": "Store unavailable", "status": 503}, headers={"Retry-After": "0"}
)


def client_for(handler: Recorder, retries: int = 3) -> AsyncClient:
    return AsyncClient(
        "http://duetime.test", retries=retries, transport=httpx.MockTransport(handler)
    )


async def test_a_503_is_tried_again_until_it_answers() -> None:
    api = Recorder(UNAVAILABLE, UNAVAILABLE, httpx.Response(201, json=task_json()))
    async with client_for(api) as client:
        task = await client.create_task(target=worker_target())
    assert task.id == TASK_ID
    assert len(api.requests) == 3
    assert {r.content for r in api.requests} == {api.requests[0].content}


async def test_retries_are_bounded_and_then_raise() -> None:
    api = Recorder(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE)
    async with client_for(api, retries=2) as client:
        with pytest.raises(ApiUnavailable):
            await client.get_task(TASK_ID)
    assert len(api.requests) == 3


async def test_a_refused_connection_is_tried_again_for_any_method() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(201, json=task_json())

    async with AsyncClient("http://d.test", transport=httpx.MockTransport(handler)) as client:
        await client.create_task(target=worker_target())
    assert len(calls) == 2


async def test_a_timed_out_create_without_idempotency_key_is_not_repeated() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= 2:  # the first try of each create times out
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(201, json=task_json())

    async with AsyncClient("http://d.test", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(TransportError, match="timed out"):
            await client.create_task(target=worker_target())
        assert len(calls) == 1  # it may have been created: repeating could create it twice
        await client.create_task(target=worker_target(), idempotency_key="report-1")
    assert len(calls) == 3  # with a key the repeat is safe, so the timeout was tried again


async def test_create_task_says_whether_it_created() -> None:
    api = Recorder(httpx.Response(201, json=task_json()), httpx.Response(200, json=task_json()))
    async with client_for(api) as client:
        first = await client.create_task(target=worker_target(), idempotency_key="k")
        again = await client.create_task(target=worker_target(), idempotency_key="k")
    assert first.created is True
    assert again.created is False


async def test_url_and_key_default_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUETIME_URL", "http://from-env.test:9999/")
    monkeypatch.setenv("DUETIME_API_KEY", "dt_env")
    api = Recorder(httpx.Response(200, json=task_json()))
    async with AsyncClient(transport=httpx.MockTransport(api)) as client:
        assert client.base_url == "http://from-env.test:9999"
        await client.get_task(TASK_ID)
    assert api.last.headers["authorization"] == "Bearer dt_env"
    with Client(transport=httpx.MockTransport(api)) as sync:
        assert sync.base_url == "http://from-env.test:9999"
