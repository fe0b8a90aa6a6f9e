"""``/v1/targets``: the calling tenant's webhook origins and their circuit breakers (SPEC §7
"Target protection"; :mod:`duetime.delivery.circuit`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall
from duetime.api.problems import problem_responses

router = APIRouter(prefix="/v1/targets", tags=["targets"], responses=problem_responses(401, 503))


class CircuitOut(BaseModel):
    origin: str = Field(description="scheme://host:port of the webhook URLs it covers.")
    state: Literal["closed", "open", "half_open"]
    failures: int = Field(description="Consecutive retryable failures that opened it.")
    cooldown_seconds: float = Field(description="The current cool-down (0 when closed).")
    open_until: datetime | None = Field(description="When a probe may go; null when closed.")
    opened: int = Field(description="Times it has opened.")
    changed_at: datetime


class CircuitListOut(BaseModel):
    items: list[CircuitOut]


@router.get(
    "",
    summary="The tenant's target origins and their circuit breakers",
    responses={200: {"model": CircuitListOut, "description": "Every origin whose circuit opened"}},
)
async def list_targets(call: TenantCall) -> Response:
    """Every webhook origin of the tenant whose circuit has ever opened, by origin, with its
    last state as any node saw it. While a circuit is open its tasks wait (``scheduled``)
    without spending attempts; one probe delivery after the cool-down closes it or opens it
    again for twice as long."""
    items = [
        {
            "origin": c.origin,
            "state": c.state,
            "failures": c.failures,
            "cooldown_seconds": c.cooldown_seconds,
            "open_until": c.open_until,
            "opened": c.opened,
            "changed_at": c.changed_at,
        }
        for c in await call.store.circuit_list(call.tenant_id)
    ]
    return render.json_response({"items": items})
