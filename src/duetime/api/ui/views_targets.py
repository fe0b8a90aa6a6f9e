"""Targets: the tenant's webhook origins and their circuit breakers (SPEC §7 "Target
protection"), as ``GET /v1/targets`` reports them (``circuit_list``). Open circuits come first,
then half-open, then closed; paged by that order and the origin."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.ui.pages import html, serve
from duetime.api.ui.session import UiCall
from duetime.target_types import BROKER_TYPES, TargetType
from duetime.types import TargetCircuit

router = APIRouter(prefix="/ui")

PAGE_SIZE = 100
STATE_ORDER = {"open": 0, "half_open": 1, "closed": 2}
STATE_LABELS = {"open": "open", "half_open": "half-open", "closed": "closed"}
BROKERS = ", ".join(t.spec.title for t in TargetType if t in BROKER_TYPES)
"""The broker targets, which have no circuit: "AMQP, NATS, Redis"."""


def _order(c: TargetCircuit) -> tuple[int, str]:
    return (STATE_ORDER.get(c.state, len(STATE_ORDER)), c.origin)


def _cursor(c: TargetCircuit) -> str:
    rank, origin = _order(c)
    return f"{rank}:{origin}"


def _after(raw: str) -> tuple[int, str] | None:
    rank, sep, origin = raw.partition(":")
    return (int(rank), origin) if sep and rank.isdigit() else None


@router.get("/targets")
async def targets_page(request: Request, after: str = "") -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        circuits = sorted(await call.store.circuit_list(call.tenant_id), key=_order)
        counts = dict.fromkeys(STATE_ORDER, 0)
        for c in circuits:
            counts[c.state] = counts.get(c.state, 0) + 1
        start = _after(after)
        rest = [c for c in circuits if start is None or _order(c) > start]
        page = rest[:PAGE_SIZE]
        return html(
            request,
            "targets.html",
            call=call,
            now=await call.store.now(),
            items=page,
            counts=counts,
            labels=STATE_LABELS,
            settings=call.services.settings,
            brokers=BROKERS,
            next_after=_cursor(page[-1]) if len(rest) > PAGE_SIZE else None,
            paged=bool(after),
        )

    return await serve(request, view)
