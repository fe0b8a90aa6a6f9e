"""Payloads by reference: a task created with ``payload_held`` keeps its payload in duetime,
and each attempt is handed a URL that reads it during that attempt only — a webhook in the
``duetime-payload-url`` header, a pull worker in its lease (the SDK's ``Job.held_payload()``);
all over loopback."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from identity_helpers import ADMIN, claim, deliver, real_now_clock, receiver, served

from duetime.clock import FakeClock
from duetime.delivery.payload_access import TOKEN_SECONDS
from duetime.delivery.webhook import WebhookDeliverer
from duetime.lifecycle.finish import ended
from duetime.sdk import AsyncClient, Worker
from duetime.store import Store
from duetime.types import AttemptOutcome, Lease

BIG = {"rows": [{"n": i, "text": "x" * 100} for i in range(200)]}


@pytest.fixture
def clock() -> FakeClock:
    return real_now_clock()


async def _end(store: Store, lease: Lease, outcome: AttemptOutcome, retry: bool) -> None:
    completion = ended(
        lease,
        outcome,
        started_at=lease.task.started_at or datetime.now(UTC),
        duration_ms=1.0,
        retryable=retry,
        retry_after_seconds=0.0,
    )
    (result,) = await store.task_complete_many([completion])
    assert result.accepted


async def test_a_webhook_reads_its_held_payload_during_its_attempt_only(
    store: Store, clock: FakeClock
) -> None:
    async with served(store, clock) as node, receiver() as hook:
        acme = await node.tenant()

        async def fetch(headers: dict[str, str]) -> tuple[int, Any]:
            async with httpx.AsyncClient() as outside:  # the target: no API key
                got = await outside.get(headers["duetime-payload-url"])
            return got.status_code, got.json()

        hook.on = fetch
        body = {"target": {"type": "http", "url": hook.url}, "payload_held": BIG}
        made = await node.client.post("/v1/tasks", json=body, headers=acme)
        assert made.status_code == 201, made.text
        task = made.json()
        assert task["payload"] is None and task["payload_ref"].startswith("duetime:held/")
        deliverer = WebhookDeliverer(
            allow_private=True, identity=node.app.state.identity, clock=clock
        )
        try:
            first = await claim(store, task["id"])
            assert (await deliver(deliverer, first)).succeeded
            (headers, sent) = hook.seen[0]
            assert sent == b"null"  # the payload itself never travels with the message
            assert hook.results == [(200, BIG)]
            url_one = headers["duetime-payload-url"]
            assert url_one.startswith(f"{node.url}/v1/payloads/{task['id']}?token=")

            # The attempt fails and the task retries: the first attempt's URL is dead now,
            # the second attempt gets its own.
            await _end(store, first, AttemptOutcome.FAILED, retry=True)
            async with httpx.AsyncClient() as outside:
                assert (await outside.get(url_one)).status_code == 403
                clock.advance(5)  # past the first retry's delay (1 s, jittered)
                await store.task_promote_due(100)
                second = await claim(store, task["id"])
                assert second.attempt == 2
                assert (await deliver(deliverer, second)).succeeded
                url_two = hook.seen[1][0]["duetime-payload-url"]
                assert url_two != url_one and hook.results[1] == (200, BIG)
                assert (await outside.get(url_one)).status_code == 403

                # Another task's token never opens this one; a forged or altered one neither.
                other = await node.client.post(
                    "/v1/tasks",
                    json={"target": {"type": "http", "url": hook.url}, "payload_held": [1]},
                    headers=acme,
                )
                token_two = url_two.split("token=", 1)[1]
                crossed = f"{node.url}/v1/payloads/{other.json()['id']}?token={token_two}"
                assert (await outside.get(crossed)).status_code == 403
                forged = url_two[:-4] + ("AAAA" if not url_two.endswith("AAAA") else "BBBB")
                assert (await outside.get(forged)).status_code == 403

                # Expired: the token says so even while its attempt runs.
                clock.advance(TOKEN_SECONDS)
                assert (await outside.get(url_two)).status_code == 403
                clock.advance(-TOKEN_SECONDS)
                assert (await outside.get(url_two)).status_code == 200
                await _end(store, second, AttemptOutcome.SUCCEEDED, retry=False)
                assert (await outside.get(url_two)).status_code == 403
        finally:
            await deliverer.close()


async def test_held_payloads_are_bounded_and_refused_where_they_cannot_be_handed_on(
    store: Store, clock: FakeClock
) -> None:
    async with served(store, clock, max_held_payload_bytes=1000) as node:
        acme = await node.tenant()
        worker = {"type": "worker"}
        cases: list[tuple[dict[str, Any], str]] = [
            ({"target": worker, "payload_held": "x" * 1000}, "payload_held"),
            ({"target": worker, "payload_held": 1, "payload": 2}, "payload_held"),
            ({"target": worker, "payload_ref": "duetime:held/x"}, "payload_ref"),
            (
                {"target": {"type": "redis", "url": "redis://127.0.0.1/0", "stream": "s"},
                 "payload_held": 1},
                "payload_held",
            ),
        ]  # fmt: skip
        for body, field in cases:
            resp = await node.client.post("/v1/tasks", json=body, headers=acme)
            assert resp.status_code in (413, 422), resp.text
            assert resp.json()["field"] == field, resp.json()
        batch = await node.client.post(
            "/v1/tasks/batch", json={"tasks": [{"target": worker, "payload_held": 1}]}, headers=acme
        )
        assert batch.status_code == 422 and batch.json()["field"] == "tasks.0.payload_held"
        # Nothing was held by the refused creates.
        assert await store.held_payload_sweep(0, 100) == 0

        # An idempotent repeat is the first task, holding the first payload.
        body = {"target": worker, "payload_held": {"v": 1}, "idempotency_key": "k"}
        first = await node.client.post("/v1/tasks", json=body, headers=acme)
        again = await node.client.post("/v1/tasks", json=body, headers=acme)
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["payload_ref"] == first.json()["payload_ref"]
        assert await store.held_payload_sweep(0, 100) == 0  # the repeat's hold was taken back
        assert (await node.client.get("/v1/tasks", headers=ADMIN)).status_code == 401


async def test_a_pull_worker_fetches_its_held_payload_lazily(
    store: Store, clock: FakeClock
) -> None:
    async with served(store, clock) as node:
        acme = await node.tenant()
        body = {"target": {"type": "worker"}, "name": "big", "payload_held": BIG}
        made = await node.client.post("/v1/tasks", json=body, headers=acme)
        assert made.status_code == 201, made.text
        key = acme["Authorization"].removeprefix("Bearer ")
        got: list[Any] = []
        urls: list[str] = []
        async with AsyncClient(node.url, key) as client:
            worker = Worker(client, queues=["default"])

            @worker.handler("big")
            async def handle(job: Any) -> str:
                assert job.payload is None
                got.append(await job.held_payload())
                got.append(await job.held_payload())  # kept: fetched once
                urls.append(job._held._path + "?token=" + job._held._token)
                return "done"

            await worker.run(until_empty=True, handle_signals=False)
        assert got == [BIG, BIG]
        task = (await node.client.get(f"/v1/tasks/{made.json()['id']}", headers=acme)).json()
        assert task["status"] == "succeeded"
        # The attempt is over: its URL no longer reads the payload.
        async with httpx.AsyncClient(base_url=node.url) as outside:
            path, token = urls[0].split("?token=")
            assert (await outside.get(path, params={"token": token})).status_code == 403
