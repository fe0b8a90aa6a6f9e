"""Creating a task whose payload duetime holds (``payload_held``; docs/security.md "Payloads by
reference"): the payload is stored apart first, under a new hold id, then the task is created
with ``payload_ref`` ``duetime:held/<hold id>`` and the hold linked to it — so no attempt can
start before its payload is there. A create that fails, or finds an idempotent twin, takes its
hold back; a hold left behind by a crash in between is swept after an hour
(:class:`duetime.engine.identity_upkeep.IdentityUpkeep`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import orjson

from duetime.api.deps import Caller
from duetime.api.schemas import TaskCreate
from duetime.delivery.payload_access import HELD_PREFIX
from duetime.errors import PayloadTooLarge, ValidationError
from duetime.ids import new_id
from duetime.types import NewTask, TaskCreated

HELD_TARGETS = frozenset({"http", "worker"})
"""The target types a held payload's URL is handed to (a webhook header, a lease field)."""

Create = Callable[[list[NewTask]], Awaitable[list[TaskCreated]]]


async def create_held(
    call: Caller, body: TaskCreate, max_bytes: int, create: Create
) -> tuple[NewTask, TaskCreated]:
    """Hold ``body.payload_held`` and create its task through ``create``; the task asked for
    and what became of it. ``ValidationError``
    (``payload_held``) for a target that cannot be handed the URL, ``PayloadTooLarge`` over
    ``max_bytes``."""
    if body.target.type not in HELD_TARGETS:
        raise ValidationError(
            "a held payload is handed to http and worker targets only", "payload_held"
        )
    raw = orjson.dumps(body.payload_held)
    if len(raw) > max_bytes:
        raise PayloadTooLarge(
            f"payload_held is {len(raw)} bytes encoded; the limit is {max_bytes}",
            field="payload_held",
        )
    hold_id = new_id()
    spec = body.model_copy(update={"payload_held": None, "payload_ref": HELD_PREFIX + hold_id})
    (new,) = await call.builder.new_tasks(call.store, call.tenant_id, [spec], batch=False)
    # An idempotent repeat must match the request as sent, not with this create's hold id.
    new = dataclasses.replace(new, request_hash=body.fingerprint())
    await call.store.held_payload_put(hold_id, call.tenant_id, raw.decode())
    try:
        (created,) = await create([new])
    except BaseException:
        await call.store.held_payload_delete(hold_id)
        raise
    if created.created:
        await call.store.held_payload_link(hold_id, call.tenant_id, created.task.id)
    else:
        await call.store.held_payload_delete(hold_id)  # the first create's hold serves
    return new, created
