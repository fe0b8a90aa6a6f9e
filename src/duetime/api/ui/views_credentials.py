"""Credentials: the tenant's named credentials as ``GET /v1/credentials`` shows them (name, kind,
fingerprint, times) — never a value, and no form to give one: secrets go in through the API or
``duetime credential put``, so a dashboard page never holds them."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.routes.credentials import credential_json
from duetime.api.ui.pages import html, serve
from duetime.api.ui.session import UiCall

router = APIRouter(prefix="/ui")


@router.get("/credentials")
async def credentials_page(request: Request) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        found = await call.store.credential_list(call.tenant_id)
        return html(
            request,
            "credentials.html",
            call=call,
            now=await call.store.now(),
            items=[credential_json(c) for c in found],
        )

    return await serve(request, view)
