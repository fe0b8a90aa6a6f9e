"""The lease calls of AsyncClient / Client over httpx.MockTransport: the requests they send and
how they read the answers (typed leases, stale leases as ApiStaleLease, batch results)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from worker_fakes import problem, task_json

from duetime import errors
from duetime.sdk import ApiStaleLease, AsyncClient, Client, TransportError
from duetime.sdk.models import AckResult, Lease, LeaseCompletion, LeaseFailure, WorkerInfo


class Recorder:
    def __init__(self, answer: httpx.Response | Exception) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)

    def client(self, timeout: float = 10.0) -> AsyncClient:
        return AsyncClient("http://d.test", "dt_k", timeout=timeout, transport=self.transport())

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


LEASE = {
    "lease_id": "L1",
    "lease_expires_at": "2030-01-01T00:00:30Z",
    "attempt": 2,
    "task": task_json("t1", "send-report", payload={"n": 1}, attempts=2),
}


async def test_lease_tasks_sends_the_spec_body_and_parses_leases() -> None:
    rec = Recorder(httpx.Response(200, json={"leases": [LEASE]}))
    async with rec.client() as client:
        leases = await client.lease_tasks(
            "mail/out",
            max_tasks=7,
            lease_seconds=12,
            wait_seconds=3,
            worker_id="w1",
            names=["send-report"],
        )
    request = rec.requests[0]
    assert request.method == "POST" and request.url.raw_path == b"/v1/queues/mail%2Fout/lease"
    assert request.headers["authorization"] == "Bearer dt_k"
    assert rec.body == {
        "max_tasks": 7,
        "lease_seconds": 12,
        "wait_seconds": 3,
        "worker_id": "w1",
        "names": ["send-report"],
    }
    assert request.extensions["timeout"]["read"] == 13.0, "the long poll stretches the timeout"
    [lease] = leases
    assert isinstance(lease, Lease) and lease.lease_id == "L1" and lease.attempt == 2
    assert lease.task.payload == {"n": 1} and lease.lease_expires_at.tzinfo is not None


async def test_lease_tasks_defaults_leave_the_rest_to_the_server() -> None:
    rec = Recorder(httpx.Response(200, json={"leases": []}))
    async with rec.client() as client:
        assert await client.lease_tasks(worker_id="w") == []
    assert rec.requests[0].url.path == "/v1/queues/default/lease"
    assert rec.body == {"max_tasks": 10, "worker_id": "w", "wait_seconds": 20.0}
    assert rec.requests[0].extensions["timeout"]["read"] == 30.0


async def test_lease_errors_are_typed() -> None:
    rec = Recorder(problem(503, "unavailable", "store down"))
    async with rec.client() as client:
        with pytest.raises(errors.StoreUnavailable):
            await client.lease_tasks(worker_id="w")
    rec = Recorder(httpx.ConnectError("refused"))
    async with rec.client() as client:
        with pytest.raises(TransportError):
            await client.lease_tasks(worker_id="w")


async def test_heartbeat_and_stale_lease() -> None:
    rec = Recorder(
        httpx.Response(200, json={"lease_id": "L1", "lease_expires_at": "2030-01-01T00:01:00Z"})
    )
    async with rec.client() as client:
        extended = await client.heartbeat("L1", 60)
    assert rec.requests[0].url.path == "/v1/leases/L1/heartbeat"
    assert rec.body == {"extend_seconds": 60} and extended.lease_expires_at.minute == 1
    rec = Recorder(problem(409, "stale-lease", "lease is no longer current"))
    async with rec.client() as client:
        with pytest.raises(ApiStaleLease) as caught:
            await client.heartbeat("L1")
    assert isinstance(caught.value, errors.StaleLease) and rec.body == {}


async def test_complete_and_fail_one_lease() -> None:
    answer = {"lease_id": "L1", "status": "ok", "task_id": "t1", "task_status": "succeeded"}
    rec = Recorder(httpx.Response(200, json=answer))
    async with rec.client() as client:
        acked = await client.complete_lease("L1", {"pages": 3})
        assert rec.body == {"result": {"pages": 3}}
        assert acked.ok and acked.task_status == "succeeded" and acked.task_id == "t1"
        await client.complete_lease("L1")
        assert rec.body == {"result": None}
        await client.fail_lease("L2", "boom", retryable=False, retry_after_seconds=None)
    assert rec.requests[-1].url.path == "/v1/leases/L2/fail"
    assert rec.body == {
        "error": "boom",
        "retryable": False,
        "retry_after_seconds": None,
        "timed_out": False,
    }


async def test_batch_acks_send_items_and_read_statuses() -> None:
    answer = {
        "items": [
            {"lease_id": "L1", "status": "ok", "task_id": "t1", "task_status": "succeeded"},
            {"lease_id": "L2", "status": "stale"},
        ]
    }
    rec = Recorder(httpx.Response(200, json=answer))
    async with rec.client() as client:
        results = await client.complete_leases(
            [LeaseCompletion(lease_id="L1", result=[1]), {"lease_id": "L2"}]
        )
        assert rec.requests[-1].url.path == "/v1/leases/complete"
        assert rec.body == {
            "items": [{"lease_id": "L1", "result": [1]}, {"lease_id": "L2", "result": None}]
        }
        assert [r.ok for r in results] == [True, False]
        assert isinstance(results[0], AckResult) and results[0].task_status == "succeeded"
        await client.fail_leases(
            [LeaseFailure(lease_id="L1", error="x"), {"lease_id": "L2", "error": "y"}]
        )
        assert rec.requests[-1].url.path == "/v1/leases/fail"
        assert rec.body["items"][1] == {
            "lease_id": "L2",
            "error": "y",
            "retryable": True,
            "retry_after_seconds": None,
            "timed_out": False,
        }
        count = len(rec.requests)
        assert await client.complete_leases([]) == []
        assert len(rec.requests) == count, "an empty batch sends nothing"
        with pytest.raises(errors.ValidationError) as caught:
            await client.fail_leases([{"lease_id": "L1"}])
        assert caught.value.field == "items.0.error"


async def test_list_workers() -> None:
    answer = {
        "items": [
            {
                "worker_id": "w1",
                "last_seen_at": "2030-01-01T00:00:00Z",
                "queues": ["default"],
                "leases": 3,
            }
        ]
    }
    rec = Recorder(httpx.Response(200, json=answer))
    async with rec.client() as client:
        [worker] = await client.list_workers()
    assert rec.requests[0].method == "GET" and rec.requests[0].url.path == "/v1/workers"
    assert isinstance(worker, WorkerInfo) and worker.leases == 3 and worker.queues == ("default",)


def test_sync_client_has_the_lease_calls() -> None:
    rec = Recorder(httpx.Response(200, json={"leases": [LEASE]}))
    with Client("http://d.test", transport=rec.transport()) as client:
        [lease] = client.lease_tasks("default", worker_id="w", max_tasks=1)
    assert lease.task.id == "t1"
    for name in ("heartbeat", "complete_lease", "fail_lease", "complete_leases", "fail_leases"):
        assert getattr(Client, name).__doc__ == getattr(AsyncClient, name).__doc__
