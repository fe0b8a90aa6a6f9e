"""Calls of pull workers (SPEC §3 "Queues and pull workers"): lease due ``worker`` tasks from a
queue, keep the leases alive, and end them — one by one or in batches.

::

    leases = await client.lease_tasks("default", max_tasks=10, wait_seconds=20, names=["email"])
    for lease in leases:
        ...  # run lease.task
    await client.complete_leases([LeaseCompletion(lease_id=lease.lease_id, result={"ok": 1})])

Every lease is a fencing token: heartbeat, complete and fail under a lease that is no longer
current (expired, reclaimed or already ended) raise :class:`~duetime.sdk.errors.ApiStaleLease`
(409) and change nothing; the batch forms report such items as ``status="stale"`` instead.
:class:`duetime.Worker` drives all of this for you.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson
import pydantic
from pydantic import BaseModel, ConfigDict

from duetime import errors
from duetime.sdk._http import _Api, _segment
from duetime.sdk.models import (
    AckResult,
    Lease,
    LeaseCompletion,
    LeaseExtension,
    LeaseFailure,
    Page,
    WorkerInfo,
)

__all__ = ["LeaseCalls"]


class _LeaseBatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    leases: tuple[Lease, ...]


class _AckBatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    items: tuple[AckResult, ...]


def _items_json(
    items: Iterable[BaseModel | Mapping[str, Any]],
    model: type[LeaseCompletion] | type[LeaseFailure],
) -> list[dict[str, Any]]:
    """Batch items as JSON, each checked locally first (a malformed one is a ValidationError
    naming ``items.<index>.<field>``, and nothing is sent)."""
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        try:
            checked = item if isinstance(item, model) else model.model_validate(dict(item))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(["items", str(index), *(str(p) for p in first["loc"])])
            raise errors.ValidationError(f"{where}: {first['msg']}", field=where) from exc
        out.append(checked.to_json())
    return out


class LeaseCalls(_Api):
    """``/v1/queues/{name}/lease``, ``/v1/leases/...`` and ``/v1/workers``."""

    async def lease_tasks(
        self,
        queue: str = "default",
        *,
        worker_id: str,
        max_tasks: int = 10,
        lease_seconds: float | None = None,
        wait_seconds: float = 20.0,
        names: Sequence[str] | None = None,
    ) -> list[Lease]:
        """Lease up to ``max_tasks`` (≤ 1000) due ``worker`` tasks of ``queue``, highest
        priority first.

        ``worker_id`` names the caller in ``GET /v1/workers`` and in attempt histories. With
        ``wait_seconds`` > 0 (≤ 60) and nothing due, the server holds the call open until a task
        is due or the wait ends (a long poll; this call's timeout is stretched by the wait) and
        may return an empty list; 0 answers at once. ``names`` narrows the lease to
        tasks with those names. Each lease lasts ``lease_seconds`` (server default 30) unless
        extended with :meth:`heartbeat`. Raises ``ApiValidationError``, ``ApiUnavailable``,
        ``TransportError``.
        """
        content = await self._lease_call(
            queue, worker_id, max_tasks, lease_seconds, wait_seconds, names
        )
        return list(_LeaseBatch.model_validate_json(content).leases)

    async def _lease_raw(
        self,
        queue: str = "default",
        *,
        worker_id: str,
        max_tasks: int = 10,
        lease_seconds: float | None = None,
        wait_seconds: float = 20.0,
        names: Sequence[str] | None = None,
        sizes: Callable[[int, int], None] | None = None,
    ) -> list[dict[str, Any]]:
        """:meth:`lease_tasks` for :class:`duetime.Worker`: the leases as the server sent them
        (plain JSON, no model validation: the worker's hot path reads a few fields of each).
        ``sizes(body_bytes, leases)`` is told how large the answer was."""
        content = await self._lease_call(
            queue, worker_id, max_tasks, lease_seconds, wait_seconds, names
        )
        leases: list[dict[str, Any]] = orjson.loads(content)["leases"]
        if sizes is not None:
            sizes(len(content), len(leases))
        return leases

    async def _lease_call(
        self,
        queue: str,
        worker_id: str,
        max_tasks: int,
        lease_seconds: float | None,
        wait_seconds: float,
        names: Sequence[str] | None,
    ) -> bytes:
        body: dict[str, Any] = {
            "max_tasks": max_tasks,
            "worker_id": worker_id,
            "wait_seconds": wait_seconds,
        }
        if lease_seconds is not None:
            body["lease_seconds"] = lease_seconds
        if names is not None:
            body["names"] = list(names)
        path = f"/v1/queues/{_segment(queue)}/lease"
        return await self._long_poll(path, body, wait_seconds)

    async def _long_poll(self, path: str, body: Any, wait_seconds: float) -> bytes:
        """POST ``body`` and return the raw 2xx body, with the read timeout stretched by
        ``wait_seconds``. Errors as in :meth:`_Api._request`."""
        response = await self._send("POST", path, body=body, extra_read_seconds=wait_seconds)
        return response.content

    async def heartbeat(self, lease_id: str, extend_seconds: float | None = None) -> LeaseExtension:
        """Extend a lease to ``extend_seconds`` from now (server default when None).
        Raises ``ApiStaleLease`` (409) when the lease was lost: stop working on the task."""
        body = {} if extend_seconds is None else {"extend_seconds": extend_seconds}
        path = f"/v1/leases/{_segment(lease_id)}/heartbeat"
        return LeaseExtension.model_validate(await self._request("POST", path, body=body))

    async def complete_lease(
        self, lease_id: str, result: Any = None, *, logs: str | None = None
    ) -> AckResult:
        """End the attempt under ``lease_id`` as succeeded with ``result`` (any JSON value, at
        most the server's payload limit). ``logs`` is text kept with the attempt (the server
        keeps the first 64 KiB of UTF-8; ``GET /v1/tasks/{id}/attempts`` shows it). Returns the
        outcome with the task's new status. Raises ``ApiStaleLease`` (409) when the lease is no
        longer current (nothing changed), ``ApiValidationError`` (413) for a result over the
        limit."""
        path = f"/v1/leases/{_segment(lease_id)}/complete"
        body = LeaseCompletion(lease_id=lease_id, result=result, logs=logs).to_json()
        del body["lease_id"]
        return AckResult.model_validate(await self._request("POST", path, body=body))

    async def fail_lease(
        self,
        lease_id: str,
        error: str,
        *,
        retryable: bool = True,
        retry_after_seconds: float | None = None,
        timed_out: bool = False,
        logs: str | None = None,
    ) -> AckResult:
        """End the attempt under ``lease_id`` as failed with ``error`` (the server keeps up to
        4096 characters). ``retryable=False`` fails the task for good; otherwise it is retried
        per its policy, not sooner than ``retry_after_seconds`` when given; ``timed_out`` records
        the attempt as ``timed_out``; ``logs`` is text kept with the attempt (the first 64 KiB).
        Returns the outcome with the task's new status. Raises ``ApiStaleLease`` (409)."""
        body = LeaseFailure(
            lease_id=lease_id,
            error=error,
            retryable=retryable,
            retry_after_seconds=retry_after_seconds,
            timed_out=timed_out,
            logs=logs,
        ).to_json()
        del body["lease_id"]
        path = f"/v1/leases/{_segment(lease_id)}/fail"
        return AckResult.model_validate(await self._request("POST", path, body=body))

    async def release_lease(self, lease_id: str, *, delay_seconds: float = 0.0) -> AckResult:
        """Hand the task under ``lease_id`` back without spending its attempt (a lease taken
        but never started): it waits again, due ``delay_seconds`` from now. Raises
        ``ApiStaleLease`` (409) when the lease is not current or the task's cancel was
        requested."""
        path = f"/v1/leases/{_segment(lease_id)}/release"
        body = {"delay_seconds": delay_seconds}
        return AckResult.model_validate(await self._request("POST", path, body=body))

    async def release_leases(
        self, lease_ids: Iterable[str], *, delay_seconds: float = 0.0
    ) -> list[AckResult]:
        """Hand back up to 1,000 leases in one call; one :class:`AckResult` per lease, in input
        order (``status="stale"`` for one not handed back — never an error)."""
        ids = list(lease_ids)
        if not ids:
            return []
        body = {"lease_ids": ids, "delay_seconds": delay_seconds}
        data = await self._request("POST", "/v1/leases/release", body=body)
        return list(_AckBatch.model_validate(data).items)

    async def complete_leases(
        self, items: Iterable[LeaseCompletion | Mapping[str, Any]]
    ) -> list[AckResult]:
        """Complete up to 1,000 leases in one call; one :class:`AckResult` per item, in input
        order (``status="stale"`` for a lease that was no longer current — never an error).
        Raises ``ApiValidationError`` (413) when a result is over the payload limit."""
        body = {"items": _items_json(items, LeaseCompletion)}
        return await self._acks("/v1/leases/complete", body)

    async def fail_leases(
        self, items: Iterable[LeaseFailure | Mapping[str, Any]]
    ) -> list[AckResult]:
        """Fail up to 1,000 leases in one call; one :class:`AckResult` per item, in input
        order."""
        body = {"items": _items_json(items, LeaseFailure)}
        return await self._acks("/v1/leases/fail", body)

    async def _acks(self, path: str, body: dict[str, Any]) -> list[AckResult]:
        if not body["items"]:
            return []
        data = await self._request("POST", path, body=body)
        return list(_AckBatch.model_validate(data).items)

    async def _acks_raw(self, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """:meth:`_acks` for the worker's outbox: the items as the server sent them."""
        if not (body.get("items") or body.get("lease_ids")):
            return []
        data = await self._request("POST", path, body=body)
        items: list[dict[str, Any]] = data["items"]
        return items

    async def list_workers(self, *, live_within_seconds: float | None = None) -> Page[WorkerInfo]:
        """The workers that leased or heart-beat within ``live_within_seconds`` (server default
        60), with the queues they poll, when they were last seen and the leases they hold; one
        page."""
        params: list[tuple[str, str | int | float | bool | None]] = []
        if live_within_seconds is not None:
            params.append(("live_within_seconds", live_within_seconds))
        data = await self._request("GET", "/v1/workers", params=params)
        return Page[WorkerInfo].model_validate(data)
