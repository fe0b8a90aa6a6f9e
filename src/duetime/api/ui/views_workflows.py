"""Workflows: the tenant's workflows, newest first, and one workflow drawn as a graph
(:mod:`~duetime.api.ui.graph_svg`) with each node's status, result or error; cancel it as a
whole, or replay its failed nodes — the API's own calls (``POST /v1/workflows/{id}/...``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api import workflow_render
from duetime.api.convert import path_id
from duetime.api.ui import graph_svg
from duetime.api.ui.pages import act, html, serve
from duetime.api.ui.session import UiCall
from duetime.errors import NotFound
from duetime.graph import RUNNING, workflow_status

router = APIRouter(prefix="/ui")

PAGE_SIZE = 50
NODES_LISTED = 300
"""Nodes listed under the graph (the graph itself summarizes wide layers)."""


def _workflow_id(raw: str) -> str:
    found = path_id(raw, "workflow_id")
    if found is None:
        raise NotFound(f"no workflow {raw!r}")
    return found


@router.get("/workflows")
async def workflows_page(request: Request, after: str = "") -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        cursor = path_id(after, "after") if after else None
        found = await call.store.workflow_list(call.tenant_id, PAGE_SIZE + 1, cursor)
        page = found[:PAGE_SIZE]
        items = [workflow_render.listed(w, counts) for w, counts in page]
        return html(
            request,
            "workflows.html",
            call=call,
            now=await call.store.now(),
            items=items,
            next_after=page[-1][0].id if len(found) > PAGE_SIZE else None,
            paged=bool(after),
        )

    return await serve(request, view)


@router.get("/workflows/{workflow_id}")
async def workflow_page(request: Request, workflow_id: str) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        found = await call.store.workflow_get(call.tenant_id, _workflow_id(workflow_id))
        if found is None:
            raise NotFound(f"no workflow {workflow_id!r}")
        status = workflow_status(n.task.status for n in found.nodes)
        rendered = workflow_render.workflow(found)
        for shown, node in zip(rendered["nodes"], found.nodes, strict=True):
            if shown["result"] is not None:  # the value itself, to be shown indented
                shown["result"] = node.task.result
        failed = sum(1 for n in found.nodes if n.task.status.value in ("failed", "cancelled"))
        return html(
            request,
            "workflow.html",
            call=call,
            now=await call.store.now(),
            workflow=rendered,
            status=status,
            drawing=graph_svg.draw(found.nodes),
            nodes=rendered["nodes"][:NODES_LISTED],
            more=max(0, len(found.nodes) - NODES_LISTED),
            can_replay=failed > 0,
            can_cancel=status == RUNNING,
        )

    return await serve(request, view)


@router.post("/workflows/{workflow_id}/replay")
async def replay_workflow(request: Request, workflow_id: str) -> Response:
    async def action(call: UiCall, form: dict[str, list[str]]) -> str:
        found = await call.store.workflow_replay(call.tenant_id, _workflow_id(workflow_id))
        ready = sum(1 for n in found.nodes if n.task.status.value in ("ready", "blocked"))
        return f"replayed the failed nodes: {ready} waiting to run"

    return await act(request, action, f"/ui/workflows/{workflow_id}")


@router.post("/workflows/{workflow_id}/cancel")
async def cancel_workflow(request: Request, workflow_id: str) -> Response:
    async def action(call: UiCall, form: dict[str, list[str]]) -> str:
        await call.store.workflow_cancel(call.tenant_id, _workflow_id(workflow_id))
        return "cancelled every node not ended (running ones end with their attempt)"

    return await act(request, action, f"/ui/workflows/{workflow_id}")
