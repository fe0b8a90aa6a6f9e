"""What a create means (SPEC §3 "Tasks"), for every way tasks are created: a request's task
specs become :class:`~duetime.types.NewTask` values under the server's bounds, within the
tenant's quotas, then stored — or handed straight to a waiting lease poll.

- **Building** (:class:`TaskBuilder`): the payload is bounded by its encoded size, every target is
  checked by the server's guard (private addresses, a broker URL's parameters) and has its
  credentials sealed for the tenant (:mod:`duetime.delivery.sealing`), a
  ``delay_seconds`` counts from the *store's* now (the time authority), read once per call.
- **Quotas** (:mod:`duetime.lifecycle.quotas`): a create over a tenant's quota creates nothing.
- **Idempotency** (:func:`check_repeats`): the same ``idempotency_key`` again with the same
  fields is the existing task; with different fields it is a ``Conflict`` naming that task. "The
  same fields" is decided on a fingerprint of the create request that made the task, stored with
  it (``tasks.request_hash``), not on the task as it is now: a task PATCHed since, or one that has
  run, still matches a repeat of its original request.
- **Flow rules** (:mod:`duetime.lifecycle.flow`): the task's own uniqueness window and its
  queue's keyed rules, keys evaluated once here.
- **Storing** (:class:`Creator`): through the lease hub, which hands a lone worker task due now
  to a poll waiting on its queue (:meth:`duetime.lifecycle.lease.LeaseHub.create`); a create
  with something to follow a task's end (callbacks, an ``on_parent_failure`` other than
  ``fail``, ``parents_in_body``: :mod:`duetime.lifecycle.follow`) through the store's graph
  create, which keeps that in the same transaction.

Errors are :class:`duetime.errors.ValidationError` naming the field by its dotted path
(``payload``, ``tasks.3.payload``) and :class:`PayloadTooLarge` for a payload over the limit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import orjson

from duetime.delivery.redact import public_target
from duetime.delivery.sealing import TargetSealer
from duetime.errors import Conflict, PayloadTooLarge, ValidationError
from duetime.flow.keys import KeySource, evaluate
from duetime.flow.rules import unique_rule
from duetime.ids import new_ids
from duetime.lifecycle.flow import FlowGate
from duetime.lifecycle.follow import CallbackSpec, follow_of
from duetime.lifecycle.lease import LeaseHub
from duetime.lifecycle.quotas import QuotaGate
from duetime.observe import tracing
from duetime.store.protocols import CreateStore, StoreClock
from duetime.types import FlowAsk, NewTask, RetryPolicy, TaskCreated, UniqueRule

TargetCheck = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""Hook run on every target at create time; raises ``ValidationError`` (or ``ValueError``), and
returns the target to store when that differs from the one given, else None."""

DEFAULT_RETRY = RetryPolicy()
SQL_FINGERPRINT = "sql:"
"""How the fingerprint of a task created through the SQL API starts (migration 0024's
``sql_api_task``): it hashes the fields as SQL checked them, so a repeat over HTTP cannot be
compared with it and is answered with the task, as a repeat of a task without a fingerprint."""


class TaskSpec(Protocol):
    """A validated create request for one task (the API's ``TaskCreate``)."""

    @property
    def name(self) -> str | None: ...
    @property
    def queue(self) -> str: ...
    @property
    def run_at(self) -> datetime | None: ...
    @property
    def delay_seconds(self) -> float | None: ...
    @property
    def payload(self) -> Any: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def depends_on(self) -> Sequence[str]: ...
    @property
    def concurrency_key(self) -> str | None: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def payload_ref(self) -> str | None: ...
    @property
    def on_parent_failure(self) -> str: ...
    @property
    def parents_in_body(self) -> bool: ...

    def callbacks(self) -> Mapping[str, CallbackSpec]:
        """The callbacks asked for, by kind (``on_success``, ``on_failure``, ``on_end``)."""

    def unique_fields(self) -> Mapping[str, Any] | None:
        """The task's own uniqueness window as JSON (None: the queue's, if any)."""

    def target_fields(self) -> dict[str, Any]:
        """The target as a JSON object."""

    def retry_policy(self) -> RetryPolicy | None:
        """The retry policy asked for (None: the default)."""

    def fingerprint(self, target: Mapping[str, Any] | None = None) -> str | None:
        """The fingerprint of the request, for idempotent repeats (None without a key);
        ``target``: the target to fingerprint in place of the one given (its credentials
        shown as fingerprints, so no plain credential is hashed into the store)."""


class TaskBuilder:
    """Turns task specs into :class:`NewTask` values under the server's bounds (see the module).

    Enforces ``max_payload_bytes`` on the encoded payload, runs ``validate_target`` (the
    server's network guard) on each target and seals its credentials with ``sealer`` (None:
    targets are stored as given; only tests of other rules build one so).
    """

    def __init__(
        self,
        max_payload_bytes: int,
        validate_target: TargetCheck | None = None,
        sealer: TargetSealer | None = None,
    ) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.validate_target = validate_target
        self.sealer = sealer

    def payload_json(self, payload: Any, field: str) -> str:
        """The payload as JSON text, refused when over the size limit."""
        try:
            raw = orjson.dumps(payload)
        except orjson.JSONEncodeError as exc:
            raise ValidationError(f"cannot be stored as JSON: {exc}", field=field) from None
        if len(raw) > self.max_payload_bytes:
            raise PayloadTooLarge(
                f"{field} is {len(raw)} bytes encoded; the limit is {self.max_payload_bytes}",
                field=field,
            )
        return raw.decode()

    async def new_tasks(
        self,
        store: StoreClock,
        tenant_id: str,
        specs: Sequence[TaskSpec],
        *,
        batch: bool,
    ) -> list[NewTask]:
        """One :class:`NewTask` per spec; field paths get a ``tasks.N.`` prefix when ``batch``.
        Each distinct target is checked once per call (a batch's items mostly share one), each
        task getting its own copy of it as checked."""
        now: datetime | None = None
        if any(spec.delay_seconds for spec in specs):
            now = await store.now()
        checked: dict[bytes, tuple[Mapping[str, Any], bool]] = {}
        return [
            self.new_task(spec, tenant_id, now, f"tasks.{i}." if batch else "", checked)
            for i, spec in enumerate(specs)
        ]

    def new_task(
        self,
        spec: TaskSpec,
        tenant_id: str,
        now: datetime | None,
        prefix: str = "",
        checked: dict[bytes, tuple[Mapping[str, Any], bool]] | None = None,
    ) -> NewTask:
        """The :class:`NewTask` of ``spec``; ``now`` is the store's clock when the spec has a
        ``delay_seconds``. ``checked`` holds the targets this call has checked already (by
        their fields), as stored and whether the check changed them."""
        run_at = spec.run_at
        if spec.delay_seconds:
            assert now is not None, "new_tasks reads the store's clock for delays"
            run_at = now + timedelta(seconds=spec.delay_seconds)
        given = spec.target_fields()
        if checked is None:
            stored = self.check_target(given, prefix, tenant_id)
            changed = stored is not given
        else:
            seen = orjson.dumps(given, option=orjson.OPT_SORT_KEYS)
            found = checked.get(seen)
            if found is None:
                stored = self.check_target(given, prefix, tenant_id)
                found = checked[seen] = (stored, stored is not given)
            stored, changed = found
        # A target with credentials is fingerprinted as shown (fingerprints, not the secrets).
        fingerprint = spec.fingerprint(public_target(stored) if changed else None)
        target = dict(stored)
        raw = spec.unique_fields()
        own = None
        if raw is not None:
            own = own_unique(unique_rule(raw, prefix + "unique", literal=True), spec)
        return NewTask(
            tenant_id=tenant_id,
            target=target,
            payload_json=self.payload_json(spec.payload, prefix + "payload"),
            name=spec.name,
            queue=spec.queue,
            run_at=run_at,
            idempotency_key=spec.idempotency_key,
            priority=spec.priority,
            retry=spec.retry_policy() or DEFAULT_RETRY,
            timeout_seconds=spec.timeout_seconds,
            depends_on=tuple(dict.fromkeys(spec.depends_on)),
            concurrency_key=spec.concurrency_key,
            labels=spec.labels,
            request_hash=fingerprint,
            payload_ref=spec.payload_ref,
            flow=None if own is None else FlowAsk(unique=own),
            follow=follow_of(
                spec, lambda given, where: self.check_target(given, where, tenant_id), prefix
            ),
        )

    def check_target(
        self, target: Mapping[str, Any], prefix: str, tenant_id: str
    ) -> Mapping[str, Any]:
        """``target`` as it is stored for ``tenant_id``: checked, changed where the check says,
        its credentials sealed. Raises ``ValidationError`` naming the field under ``prefix``."""
        try:
            if self.validate_target is not None:
                target = self.validate_target(target) or target
            if self.sealer is not None:
                target = self.sealer.seal(target, tenant_id)
            return target
        except ValidationError as exc:
            raise ValidationError(exc.detail, field=prefix + (exc.field or "target")) from None
        except ValueError as exc:
            raise ValidationError(str(exc), field=prefix + "target.url") from None


def own_unique(rule: UniqueRule, spec: TaskSpec) -> tuple[str, UniqueRule] | None:
    """A task's own uniqueness window with its key: given, or evaluated on the task (None when
    the expression has no value for it: no window)."""
    if rule.literal is not None:
        return rule.literal, rule
    payload_json = orjson.dumps(spec.payload).decode()
    source = KeySource(spec.name, spec.labels, payload_json, spec.concurrency_key)
    key = evaluate(rule.key, source)
    return None if key is None else (key, rule)


def check_repeats(new: Sequence[NewTask], made: Sequence[TaskCreated], prefix: bool) -> None:
    """Raise ``Conflict`` for the first idempotent hit whose original request differs (tasks
    made before fingerprints were kept have none, and tasks made through the SQL API have a
    fingerprint of its own, :data:`SQL_FINGERPRINT`: both are accepted). For a single create
    only: a batch's other tasks are made by then, and a batch returns hits as they are."""
    for i, (asked, result) in enumerate(zip(new, made, strict=True)):
        existing = result.task.request_hash
        if result.created or result.flow or asked.idempotency_key is None:
            continue  # made, or answered by a flow rule (a uniqueness window, a debounce)
        if (
            existing is None
            or existing == asked.request_hash
            or existing.startswith(SQL_FINGERPRINT)
        ):
            continue
        where = f"tasks.{i}: " if prefix else ""
        raise Conflict(
            f"{where}idempotency_key {asked.idempotency_key!r} was used for task "
            f"{result.task.id} with different fields; repeat that request exactly, or use "
            f"another key"
        )


def _uncounted(tasks: int) -> None:
    return None


class Creator:
    """Stores built tasks within their tenant's quotas (see the module); one per node's API."""

    def __init__(
        self,
        builder: TaskBuilder,
        quotas: QuotaGate,
        leases: LeaseHub,
        count: Callable[[int], None] = _uncounted,
        flows: FlowGate | None = None,
    ) -> None:
        self.builder = builder
        self.quotas = quotas
        self.leases = leases
        self.count = count
        """Told of the tasks created here (the node's busy hot path)."""
        self.flows = flows
        """The queues' keyed flow rules (:mod:`duetime.lifecycle.flow`); None: none apply."""

    async def create(
        self,
        store: CreateStore,
        tenant_id: str,
        new: Sequence[NewTask],
        traceparent: str | None = None,
    ) -> list[TaskCreated]:
        """Store ``new`` (all of ``tenant_id``), all or nothing, results in input order, under
        their queues' flow rules; ``TooManyRequests`` over a quota, with nothing created. With
        tracing on, or a ``traceparent`` given, in a span and stamped with its trace context."""
        await self.quotas.admit_tasks(tenant_id, len(new))
        if self.flows is not None:
            new = await self.flows.apply(store, tenant_id, new)
        self.count(len(new))
        if any(task.follow is not None for task in new):  # callbacks, a failure policy
            return await store.task_create_graph(new_ids(len(new)), new)
        create = functools.partial(self.leases.create, store)
        if traceparent is None and not tracing.ENABLED:
            return await create(new)
        return await tracing.create_traced(create, new, traceparent)
