"""The seam between the engine and push targets: one :class:`Delivery` in, one :class:`Outcome` out.

The dispatcher hands each leased push task to a :class:`Deliverer` (webhook, AMQP, NATS, Redis, or
:class:`duetime.testing.fakes.FakeDeliverer` in tests) and turns the :class:`Outcome` into a
completion. A deliverer never raises for a failed delivery: every failure, including its own bugs,
is an outcome the retry policy can act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from duetime.delivery.parents import envelope
from duetime.types import AttemptOutcome, Credential, ParentsOf, Task, value_type

RESULT_LIMIT_BYTES = 4096
"""How much of a receiver's answer is kept as the task's ``result`` (SPEC §4)."""


class CredentialSource(Protocol):
    """Where a deliverer finds a tenant's named credentials (:mod:`.credentials`)."""

    async def get(self, tenant_id: str, name: str) -> Credential | None:
        """The tenant's credential ``name`` as stored (sealed), or None when it has none.
        Raises ``StoreUnavailable`` when the store cannot be asked."""
        ...


@value_type
class Delivery:
    """One attempt to push ``task`` to its target.

    :meth:`body` is the exact body to send. ``attempt`` is the 1-based attempt number
    (:attr:`duetime.types.Lease.attempt`). ``secrets`` are the tenant's live ``whsec_`` signing
    secrets; a webhook carries one signature per secret (several during a rotation overlap).
    """

    task: Task
    attempt: int
    secrets: Sequence[str] = ()
    traceparent: str | None = None
    """The trace context to hand on (the delivery span's; None: the task's own)."""
    credentials: CredentialSource | None = None
    """Where a target's ``auth.credential`` is found (None: nowhere; such a delivery fails)."""
    parents: ParentsOf | None = None
    """The task's parents, read for a task with ``depends_on`` (:mod:`duetime.delivery.
    parents`): sent with the payload when the task asked for ``parents_in_body``."""

    @property
    def enveloped(self) -> bool:
        """Whether the body is the parents' envelope rather than the payload itself."""
        return self.parents is not None and self.parents.parents_in_body

    def body(self) -> bytes:
        """The exact bytes to send: the payload, or the envelope with the parents."""
        if self.parents is not None and self.parents.parents_in_body:
            return envelope(self.task.payload_json, self.parents)
        return self.task.payload_json.encode()


@value_type
class Outcome:
    """How one delivery attempt ended.

    ``outcome`` is ``SUCCEEDED``, ``FAILED`` or ``TIMED_OUT``. ``retryable=False`` sends the task
    straight to ``failed`` (the dead-letter set). ``error`` is short and human readable (it becomes
    the attempt's error and the task's ``last_error``). ``result_json`` is JSON text: the first
    :data:`RESULT_LIMIT_BYTES` of a successful answer, as a JSON value when it parses and as a JSON
    string otherwise. ``retry_after_seconds`` is the receiver's ``Retry-After``, if it sent one.
    ``response`` is the start of the answer's body as text (at most :data:`RESULT_LIMIT_BYTES`,
    cleaned), on success and failure alike: the attempt keeps it (None: no body, or no answer).
    """

    outcome: AttemptOutcome
    retryable: bool
    http_status: int | None = None
    error: str | None = None
    result_json: str | None = None
    retry_after_seconds: float | None = None
    response: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome is AttemptOutcome.SUCCEEDED


class Deliverer(Protocol):
    """Pushes tasks to one kind of target.

    Implementations are safe to call concurrently from many tasks of one event loop.
    """

    async def deliver(self, delivery: Delivery) -> Outcome:
        """Make one attempt. Never raises (cancellation aside): failures are outcomes."""
        ...

    async def close(self) -> None:
        """Release connections and pools. Idempotent; no delivery may start afterwards."""
        ...
