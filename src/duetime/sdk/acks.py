"""The worker's outbox: completions and failures, buffered for a few milliseconds and sent in
batches (``POST /v1/leases/complete`` and ``/v1/leases/fail``), so a burst of short tasks costs
a few requests instead of one per task.

A batch the server cannot take right now (503, no connection) is kept and sent again with
backoff; a lease the server calls stale is counted and forgotten (another worker holds the task
now, or it already ended); a batch the server rejects as invalid is retried item by item so one
bad result cannot sink its neighbours.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import orjson

from duetime.sdk.errors import ApiConflict, ApiError, ApiUnavailable, ApiValidationError
from duetime.sdk.errors import TransportError as ApiTransportError

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient

__all__ = ["AckBatcher", "AckOutcome", "encode_result"]

log = logging.getLogger("duetime.worker")

AckOutcome = Literal["ok", "stale", "error", "failed_instead"]
"""What became of one ack: applied; refused as stale (fenced); dropped after an error; or (a
completion whose result the server rejected) sent as a non-retryable failure instead."""

_Kind = Literal["complete", "fail", "release"]
_PATHS: dict[_Kind, str] = {
    "complete": "/v1/leases/complete",
    "fail": "/v1/leases/fail",
    "release": "/v1/leases/release",
}


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, set | frozenset):
        return list(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def encode_result(value: Any) -> orjson.Fragment:
    """A handler's return value as JSON, encoded once (raises ``TypeError`` when it is not
    JSON: dataclasses, datetimes, UUIDs, pydantic models and sets are accepted)."""
    return orjson.Fragment(orjson.dumps(value, default=_default))


class AckBatcher:
    """Buffers acks and flushes them in batches: ``flush_seconds`` after the first one of a
    batch, or at once when ``batch_size`` are waiting; up to ``max_in_flight`` batches travel at
    the same time. ``on_done(lease_id, outcome)`` is called once per ack when its fate is known.
    """

    def __init__(
        self,
        client: AsyncClient,
        on_done: Callable[[str, AckOutcome], None],
        *,
        flush_seconds: float,
        batch_size: int,
        backoff_seconds: float,
        max_backoff_seconds: float,
        max_in_flight: int = 4,
    ) -> None:
        self._client = client
        self._on_done = on_done
        self._flush_seconds = flush_seconds
        self._batch_size = batch_size
        self._backoff = backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._buffers: dict[_Kind, list[dict[str, Any]]] = {
            "complete": [],
            "fail": [],
            "release": [],
        }
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._sending: dict[asyncio.Task[None], int] = {}  # batch in flight -> its size
        self._deadline: float | None = None  # set by close(): give up retrying after it
        self._closing = False

    @property
    def pending(self) -> int:
        """Acks buffered or in flight."""
        return sum(len(b) for b in self._buffers.values()) + sum(self._sending.values())

    def complete(self, lease_id: str, result: orjson.Fragment, logs: str | None = None) -> None:
        """Queue a completion; ``result`` from :func:`encode_result`; ``logs`` kept with the
        attempt."""
        item: dict[str, Any] = {"lease_id": lease_id, "result": result}
        if logs is not None:
            item["logs"] = logs
        self._add("complete", item)

    def fail(
        self,
        lease_id: str,
        error: str,
        *,
        retryable: bool,
        retry_after_seconds: float | None,
        timed_out: bool = False,
        logs: str | None = None,
    ) -> None:
        """Queue a failure (``timed_out``: the handler ran out of the task's timeout; ``logs``
        kept with the attempt)."""
        item: dict[str, Any] = {
            "lease_id": lease_id,
            "error": error,
            "retryable": retryable,
            "retry_after_seconds": retry_after_seconds,
            "timed_out": timed_out,
        }
        if logs is not None:
            item["logs"] = logs
        self._add("fail", item)

    def release(self, lease_id: str) -> None:
        """Queue a hand-back of a lease that never started (its attempt is not spent)."""
        self._add("release", {"lease_id": lease_id})

    def _add(self, kind: _Kind, item: dict[str, Any]) -> None:
        self._buffers[kind].append(item)
        self._wake.set()

    async def run(self) -> None:
        """Flush until :meth:`close`; cancelled by it."""
        while True:
            await self._wake.wait()
            waiting = sum(len(b) for b in self._buffers.values())
            if not self._closing and waiting < self._batch_size:
                await asyncio.sleep(self._flush_seconds)
            self._wake.clear()
            for kind, buffer in self._buffers.items():
                while buffer:
                    batch = buffer[: self._batch_size]
                    del buffer[: self._batch_size]
                    await self._slots.acquire()
                    task = asyncio.create_task(self._send(kind, batch))
                    self._sending[task] = len(batch)
                    task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.pop(task, None)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("ack batch failed unexpectedly", exc_info=task.exception())

    async def close(self, within: float) -> None:
        """Send everything still buffered, retrying for at most ``within`` seconds; what cannot
        be sent by then is dropped (its leases expire on the server and the tasks are retried)."""
        loop = asyncio.get_running_loop()
        self._closing = True
        self._deadline = loop.time() + within
        self._wake.set()
        while any(self._buffers.values()) or self._sending:
            if loop.time() >= self._deadline:
                break
            await asyncio.sleep(0.001)
            if self._sending:
                await asyncio.wait(set(self._sending), timeout=self._deadline - loop.time())
        for task in list(self._sending):
            task.cancel()
        for kind, buffer in self._buffers.items():
            if buffer:
                log.warning("dropping %d unsent %s acks at shutdown", len(buffer), kind)
            for item in buffer:
                self._on_done(item["lease_id"], "error")
            buffer.clear()

    async def _send(self, kind: _Kind, batch: list[dict[str, Any]]) -> None:
        delay = self._backoff
        while True:
            try:
                body: dict[str, Any] = (
                    {"lease_ids": [item["lease_id"] for item in batch]}
                    if kind == "release"
                    else {"items": batch}
                )
                results = await self._client._acks_raw(_PATHS[kind], body)
            except (ApiUnavailable, ApiTransportError) as exc:
                if not self._may_retry(delay):
                    log.warning("giving up on %d %s acks: %s", len(batch), kind, exc)
                    for item in batch:
                        self._on_done(item["lease_id"], "error")
                    return
                log.warning("%s acks not sent (%s); retrying", kind, exc)
                wait = getattr(exc, "retry_after", None) or delay
                await asyncio.sleep(wait * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self._max_backoff)
                continue
            except ApiValidationError as exc:
                log.warning("%s batch rejected (%s); sending its acks one by one", kind, exc)
                for item in batch:
                    self._on_done(item["lease_id"], await self._send_one(kind, item))
                return
            except ApiError as exc:
                log.error("%s batch of %d refused: %s", kind, len(batch), exc)
                for item in batch:
                    self._on_done(item["lease_id"], "error")
                return
            by_lease = {r.get("lease_id"): r for r in results}
            for item in batch:
                result = by_lease.get(item["lease_id"])
                if result is None:
                    outcome: AckOutcome = "error"
                elif result.get("status") == "ok":
                    outcome = "ok"
                else:
                    outcome = "stale"
                self._on_done(item["lease_id"], outcome)
            return

    def _may_retry(self, delay: float) -> bool:
        if self._deadline is None:
            return True
        return asyncio.get_running_loop().time() + delay < self._deadline

    async def _send_one(self, kind: _Kind, item: dict[str, Any]) -> AckOutcome:
        lease_id = item["lease_id"]
        try:
            if kind == "complete":
                await self._client.complete_lease(lease_id, item["result"], logs=item.get("logs"))
            elif kind == "release":
                await self._client.release_lease(lease_id)
            else:
                await self._client.fail_lease(
                    lease_id,
                    item["error"],
                    retryable=item["retryable"],
                    retry_after_seconds=item["retry_after_seconds"],
                    timed_out=item.get("timed_out", False),
                    logs=item.get("logs"),
                )
        except ApiConflict:
            return "stale"
        except ApiValidationError as exc:
            if kind == "complete":  # e.g. a result too large: the attempt failed after all
                error = f"result rejected by the server: {exc.detail or exc}"
                fallback = {
                    "error": error,
                    "retryable": False,
                    "retry_after_seconds": None,
                    "logs": item.get("logs"),
                }
                outcome = await self._send_one("fail", {"lease_id": lease_id, **fallback})
                return "failed_instead" if outcome == "ok" else outcome
            log.error("fail of lease %s rejected: %s", lease_id, exc)
            return "error"
        except (ApiError, ApiTransportError) as exc:
            log.error("ack of lease %s not sent: %s", lease_id, exc)
            return "error"
        return "ok"
