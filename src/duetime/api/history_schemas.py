"""Response shapes of ``GET /v1/history`` (documentation only; rendering is in
:mod:`duetime.api.routes.history`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class HistoryEventOut(BaseModel):
    """One audit record: a task's state change, an attempt, or a schedule change."""

    id: int = Field(description="Orders records of the same instant; unique in a store.")
    at: datetime
    kind: str = Field(description="`task`, `attempt` or `schedule`.")
    task_id: str | None
    schedule_id: str | None
    name: str | None
    queue: str | None
    labels: dict[str, str]
    from_status: str | None = Field(description="`task`: the status before (null on create).")
    to_status: str | None = Field(
        description="`task`: the status after; `schedule`: the revision's action."
    )
    actor: str | None = Field(
        description="Who: `key:<api key id>`, `dev`, `worker:<id>`, `schedule:<id>`, `api` "
        "(a create) or `node`."
    )
    fields: dict[str, Any] | None = Field(
        description="For changes of fields: field → [before, after] (`payload`: `changed`)."
    )
    attempt: int | None
    outcome: str | None
    error: str | None
    http_status: int | None
    duration_ms: float | None
    worker: str | None
    logs: str | None = Field(description="`attempt`: the worker's logs (at most 64 KiB).")
    response: str | None = Field(
        description="`attempt` of a webhook: the first 4 KiB of the target's answer body."
    )


class HistoryListOut(BaseModel):
    items: list[HistoryEventOut]
    next_cursor: str | None
