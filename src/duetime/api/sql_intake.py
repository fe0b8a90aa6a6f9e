"""Workflows requested through the SQL API, made by a node (docs/api.md "SQL API").

``duetime.create_workflow_v1(workflow jsonb)`` (migration ``0031_sql_api_workflows``) records
the body of ``POST /v1/workflows`` as a request in the caller's own transaction; it exists only
if that transaction commits, and its ``NOTIFY`` wakes the nodes then. :class:`WorkflowIntake`
takes pending requests (``FOR UPDATE SKIP LOCKED``, held for a while, so two nodes never take
one at once) and makes each exactly as the route does — the same body model, the route's own
:func:`~duetime.api.routes.workflows.make_workflow` with the node's creator (its target checks,
the private-address guard, quotas) — under the request's id, attributed to ``sql:<role>``. A
request the route would refuse is recorded as refused with the RFC 9457 problem the route would
have answered; one made records its workflow.

A crash between making the workflow and recording it leaves the request pending; the node that
takes it again finds the workflow by its id (or by its idempotency key) instead of making a
second, and so does a node whose make lost the race to another's (the workflow's id is unique).
Ended requests are kept for :data:`KEEP_SECONDS`, for ``workflow_request_v1`` to tell.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from fastapi.exceptions import RequestValidationError

from duetime import metrics
from duetime.api.deps import validated
from duetime.api.problems import Problem, error_problem, validation_problem
from duetime.api.routes.workflows import make_workflow
from duetime.api.workflow_schemas import WorkflowCreate
from duetime.clock import Clock
from duetime.engine.service import Service
from duetime.errors import Conflict, DuetimeError, StoreUnavailable
from duetime.history.actor import acting_as
from duetime.lifecycle.create import Creator
from duetime.lifecycle.workflow import CreateWorkflowStore
from duetime.store.protocols import RequestEnd, SqlRequestStore
from duetime.types import SqlWorkflowRequest, WorkflowView

log = logging.getLogger("duetime.sql")

INSTANCE = "/v1/workflows"
"""The ``instance`` of a refused request's problem: the route it stands for."""
KEEP_SECONDS = 86_400.0
"""How long an ended request stays readable through ``workflow_request_v1``."""
_SWEEP_EVERY_SECONDS = 60.0
_INTERNAL = Problem(
    500, "internal", "Internal server error", "the node could not make the workflow; see its log"
)


class IntakeStore(SqlRequestStore, CreateWorkflowStore, Protocol):
    """What the intake uses of the store."""


class WorkflowIntake(Service):
    """See the module. ``batch``: requests taken per round, ``concurrency`` of them made at
    once (each workflow is a transaction of its own; the outcomes are recorded in one
    statement); ``interval``: the longest sleep between rounds without a wake-up;
    ``hold_seconds``: how long a taken request is this node's before another may take it."""

    name = "sql-intake"

    def __init__(
        self,
        store: IntakeStore,
        creator: Creator,
        clock: Clock,
        *,
        batch: int = 100,
        concurrency: int = 8,
        interval: float = 1.0,
        hold_seconds: float = 60.0,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._creator = creator
        self._batch = batch
        self._concurrency = concurrency
        self._interval = interval
        self._hold = hold_seconds
        self._swept_at = float("-inf")

    async def run_once(self) -> int:
        taken = await self._store.sql_workflow_requests_take(self._batch, self._hold)
        if taken:
            # Each workflow is its own transaction: up to ``concurrency`` at once. A store
            # outage stops the round; what it did not record stays pending, taken again later.
            gate = asyncio.Semaphore(self._concurrency)

            async def make(request: SqlWorkflowRequest) -> RequestEnd:
                async with gate:
                    return await self._make(request)

            try:
                async with asyncio.TaskGroup() as group:
                    made = [group.create_task(make(request)) for request in taken]
            except* StoreUnavailable as outage:
                raise outage.exceptions[0] from None
            ended = [task.result() for task in made]
            await self._store.sql_workflow_requests_end(ended)
            for request_id, workflow_id, problem in ended:
                outcome = "made" if workflow_id is not None else "refused"
                metrics.child(metrics.SQL_WORKFLOW_REQUESTS, outcome).inc()
                if problem is not None:
                    log.info(
                        "sql-intake: workflow request %s refused: %s",
                        request_id,
                        problem["detail"],
                        extra={"event": "sql_workflow_refused", "request_id": request_id},
                    )
        if not taken and self._clock.monotonic() - self._swept_at >= _SWEEP_EVERY_SECONDS:
            await self._store.sql_workflow_requests_sweep(KEEP_SECONDS, 1000)
            self._swept_at = self._clock.monotonic()
        return len(taken)

    async def wait(self, did: int) -> None:
        if did < self._batch:  # else more may be waiting
            await self._store.requests_signal.wait(self._interval)

    async def _make(self, request: SqlWorkflowRequest) -> RequestEnd:
        """Make the request's workflow: its outcome, to record."""
        try:
            return request.id, await self._create(request), None
        except RequestValidationError as exc:
            return request.id, None, validation_problem(exc).body(INSTANCE)
        except StoreUnavailable:
            raise  # still pending: taken again once its hold passes
        except DuetimeError as exc:
            return request.id, None, (error_problem(exc) or _INTERNAL).body(INSTANCE)
        except Exception:
            log.exception("sql-intake: workflow request %s failed", request.id)
            return request.id, None, _INTERNAL.body(INSTANCE)

    async def _create(self, request: SqlWorkflowRequest) -> str:
        body = validated(request.body.encode(), WorkflowCreate)
        with acting_as(f"sql:{request.role_name}"):
            try:
                view, _ = await self._make_workflow(request, body)
            except StoreUnavailable:
                raise
            except DuetimeError as exc:
                # A workflow under the request's id was made by a node that stopped before it
                # recorded the request, or by one whose hold ran out while it worked: it is
                # this request's, whatever refused this make (its id taken, a quota since).
                made = await self._store.workflow_get(request.tenant_id, request.id)
                if made is not None:
                    return made.workflow.id
                if not isinstance(exc, Conflict):
                    raise
                # A create with the same idempotency key committed first: it answers now.
                view, _ = await self._make_workflow(request, body)
        return view.workflow.id

    async def _make_workflow(
        self, request: SqlWorkflowRequest, body: WorkflowCreate
    ) -> tuple[WorkflowView, bool]:
        return await make_workflow(
            self._creator,
            self._store,
            request.tenant_id,
            body,
            fingerprint=request.fingerprint,
            workflow_id=request.id,
        )
