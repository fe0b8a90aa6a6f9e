"""Webhook attempts keep the start of their target's answer (SPEC §4, §8 "Audit trail"): status
and the first 4 KiB of the body on the attempt row, success or failure, through the dispatcher
with a real receiver on 127.0.0.1, on both stores; and the history keeps it too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from duetime.clock import FakeClock
from duetime.delivery.webhook import WebhookDeliverer
from duetime.engine.dispatcher import Dispatcher
from duetime.history.events import HistoryFilter
from duetime.store import Store
from duetime.types import AttemptOutcome, NewTask, TargetType, TaskStatus

LONG = "é" * 3000  # 6,000 bytes: past the 4 KiB kept


@pytest.fixture
async def target() -> AsyncIterator[str]:
    """A receiver on 127.0.0.1 (base URL): /fail answers 503 with a multi-line body, /long 500
    with a body past 4 KiB, /ok 200 with JSON, /gone 410."""

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=503, text="upstream down\nretry later\n")

    async def long(request: web.Request) -> web.Response:
        return web.Response(status=500, text=LONG)

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"fine": True})

    async def gone(request: web.Request) -> web.Response:
        return web.Response(status=410, text="no such hook")

    app = web.Application()
    for path, handler in (("/fail", fail), ("/long", long), ("/ok", ok), ("/gone", gone)):
        app.router.add_post(path, handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_webhook_attempts_keep_the_answers_start(
    store: Store, clock: FakeClock, target: str
) -> None:
    tenant = (await store.tenant_create("acme")).id
    ids = {}
    for path in ("fail", "long", "ok", "gone"):
        url = {"type": "http", "url": f"{target}/{path}", "method": "POST"}
        [made] = await store.task_create_many([NewTask(tenant_id=tenant, target=url, name=path)])
        ids[path] = made.task.id
    deliverer = WebhookDeliverer(allow_private=True)
    dispatcher = Dispatcher(
        store,
        {TargetType.HTTP: deliverer},
        clock,
        node_id="node-a",
        concurrency=8,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )
    await dispatcher.start()
    try:
        assert await dispatcher.run_once() == 4
        await asyncio.wait_for(dispatcher.drain(grace=5), 30)
    finally:
        await deliverer.close()

    got = {}
    for path, task_id in ids.items():
        (attempt,) = await store.attempt_list(tenant, task_id)
        got[path] = attempt
    fail, long, ok, gone = got["fail"], got["long"], got["ok"], got["gone"]
    assert (fail.outcome, fail.http_status) == (AttemptOutcome.FAILED, 503)
    assert fail.error == "HTTP 503: upstream down retry later"  # one line, for the error
    assert fail.response == "upstream down\nretry later\n"  # the body as it came
    assert long.http_status == 500
    assert long.response == "é" * 2048  # the first 4,096 bytes, whole characters
    assert (ok.outcome, ok.http_status, ok.response) == (
        AttemptOutcome.SUCCEEDED,
        200,
        '{"fine": true}',  # aiohttp's json_response, as sent
    )
    assert (gone.http_status, gone.response) == (410, "no such hook")
    ended = await store.task_get(tenant, ids["gone"])
    assert ended is not None and ended.status is TaskStatus.FAILED
    assert all(a.logs is None for a in got.values())

    events = await store.history_query(
        HistoryFilter(tenant_id=tenant, task_id=ids["fail"], kinds=("attempt",))
    )
    assert [(e.http_status, e.response) for e in events] == [(503, "upstream down\nretry later\n")]
