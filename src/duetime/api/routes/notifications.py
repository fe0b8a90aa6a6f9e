"""``/v1/tenant/notifications``: where the calling tenant's harm events go (SPEC §9).

``PUT`` sets the event types and the ``http`` target (checked like a task's target: the network
guard applies, and its credentials are sealed; answers show them as ``***`` and a fingerprint),
``GET`` reads them (404 when none are set), ``DELETE`` removes them. Events are delivered as
signed webhooks by the engine (see :mod:`duetime.notify`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, field_validator
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schemas import HttpTarget, StrictModel
from duetime.delivery.redact import public_target
from duetime.errors import NotFound
from duetime.notify.events import EVENT_TYPES
from duetime.types import NotificationSettings

router = APIRouter(
    prefix="/v1/tenant/notifications",
    tags=["tenant"],
    responses=problem_responses(400, 401, 422, 503),
)

EventType = Literal[
    "task.dead_lettered",
    "schedule.tick_missed",
    "target.circuit_opened",
    "tenant.quota_reached",
    "workflow.request_refused",
]
assert set(EventType.__args__) == set(EVENT_TYPES)  # type: ignore[attr-defined]


class NotificationsIn(StrictModel):
    """The harm events to be told of, and the webhook they go to."""

    events: Annotated[
        list[EventType],
        Field(min_length=1, max_length=len(EVENT_TYPES), json_schema_extra={"uniqueItems": True}),
    ]
    target: HttpTarget

    @field_validator("events")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each event type may appear once")
        return value


class NotificationsOut(BaseModel):
    events: list[str]
    target: dict[str, Any]
    updated_at: str = Field(description="RFC 3339")


def _out(found: NotificationSettings) -> dict[str, Any]:
    return {
        "events": list(found.events),
        "target": public_target(found.target),
        "updated_at": found.updated_at,
    }


@router.put(
    "",
    summary="Set where harm events go",
    openapi_extra=body_schema(NotificationsIn),
    responses={200: {"model": NotificationsOut, "description": "The settings now"}},
)
async def put_notifications(call: TenantCall, request: Request) -> Response:
    """Replace the tenant's notification settings."""
    body = await json_body(request, NotificationsIn)
    target = call.builder.check_target(body.target.model_dump(), "", call.tenant_id)
    found = await call.store.notification_put(call.tenant_id, body.events, target)
    return render.json_response(_out(found))


@router.get(
    "",
    summary="Where harm events go",
    responses={
        200: {"model": NotificationsOut, "description": "The settings"},
        **problem_responses(404),
    },
)
async def get_notifications(call: TenantCall) -> Response:
    found = await call.store.notification_get(call.tenant_id)
    if found is None:
        raise NotFound("no notifications are set for this tenant")
    return render.json_response(_out(found))


@router.delete("", status_code=204, summary="Stop notifications", responses=problem_responses(404))
async def delete_notifications(call: TenantCall) -> Response:
    if not await call.store.notification_delete(call.tenant_id):
        raise NotFound("no notifications are set for this tenant")
    return Response(status_code=204)
