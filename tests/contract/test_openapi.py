"""schemathesis over ``/openapi.json`` against a real server on each store: whatever a client
sends, no 500; a request the document calls invalid is refused and one it calls valid is not,
unless for a reason the document gives — a credential (401, 403), a resource (404), a state
(409), a limit (413, 429), a cursor the server did not issue (400), or a 422 whose every error
names a rule of the document's ``x-rules`` (what a request must hold that JSON Schema cannot
say: one field against another, a grammar, a range of instants); every answer matches the
status codes, media types, schemas and ``Allow`` header the document declares. Bounded for CI:
a few examples per operation, positive and negative."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import schemathesis
from contract_server import ADMIN_TOKEN, Server
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import store_from_url

MAX_EXAMPLES = int(os.environ.get("DUETIME_CONTRACT_EXAMPLES", "3"))
"""Examples per operation; CI keeps the default, a deeper run sets the variable."""


def _document() -> dict[str, Any]:
    # The document does not depend on the store: build it from an app over an unopened one.
    app = create_app(Settings(admin_token=ADMIN_TOKEN), store_from_url("sqlite:///unused.db"))
    return app.openapi()


def _rules(node: Any, field: str = "") -> Iterator[tuple[str, str]]:
    """Every (field, detail) of the document's ``x-rules``; ``*`` is the property it is on."""
    if isinstance(node, dict):
        if "in" in node and "name" in node:  # a parameter
            field = node["name"]
        for rule in node.get("x-rules", ()):
            yield (field if rule["field"] == "*" else rule["field"]), rule["detail"]
        for key, value in node.items():
            if key == "properties":
                for name, prop in value.items():
                    yield from _rules(prop, name)
            elif key != "x-rules":
                yield from _rules(value, field)
    elif isinstance(node, list):
        for item in node:
            yield from _rules(item, field)


DOCUMENT = _document()
BAD_CURSOR = "urn:duetime:problem:bad-cursor"
RULES = sorted(set(_rules(DOCUMENT)))


def documented(field: str, detail: str) -> bool:
    """Whether a 422's error is one of :data:`RULES`: its field (list indexes left out) holds
    the rule's (``task.retry.max_delay_seconds`` holds ``max_delay_seconds``, ``defaults.x``
    holds ``defaults``), and its detail starts with the rule's."""
    parts = [part for part in field.split(".") if not part.isdigit()]
    path = f".{'.'.join(parts)}."
    return any(f".{name}." in path and detail.startswith(start) for name, start in RULES)


@schemathesis.check
def refused_only_as_documented(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, where a 422 is also accepted when each of its errors is
    :func:`documented`."""
    if response.status_code == 400 and response.json().get("type") == BAD_CURSOR:
        return None  # a cursor this server did not issue: the cursor's documented rule
    if response.status_code == 422 and case.meta is not None:
        if case.meta.generation.mode.is_positive:
            problem = response.json()
            undocumented = [
                error
                for error in problem.get("errors", [problem])
                if not documented(error.get("field") or "", error.get("detail", ""))
            ]
            assert not undocumented, (
                f"a valid request refused for no documented reason: {undocumented}"
            )
        return None
    return positive_data_acceptance(ctx, response, case)


schema = schemathesis.openapi.from_dict(DOCUMENT)
# An invalid request may also be refused as too large (a string over its maxLength can make the
# whole body larger than the server reads: 413, as documented on every route with a body).
_refusals = schema.config.checks.negative_data_rejection
_refusals.expected_statuses = [*_refusals.expected_statuses, "413"]
schema.config.checks.positive_data_acceptance.expected_statuses = [
    "2xx", "401", "403", "404", "409", "413", "429",
]  # fmt: skip


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: Any, server: Server) -> None:
    if case.path.endswith("/lease") and isinstance(case.body, dict):
        # A long poll (20 s by default) would only make it slow; a value that is wrong on
        # purpose (a negative case) is left as it is.
        wait = case.body.get("wait_seconds", 20)
        if type(wait) in (int, float) and 0 <= wait <= 60:
            case.body["wait_seconds"] = 0
    if case.path in ("/v1/tasks/cancel", "/v1/tasks/replay") and isinstance(case.body, dict):
        # A walk throttled to a few tasks a second over every task made so far, likewise.
        rate = case.body.get("rate_per_second", 100)
        if type(rate) in (int, float) and 1 <= rate <= 100_000:
            case.body["rate_per_second"] = 100_000
    case.call_and_validate(
        base_url=server.base_url,
        headers=server.headers_for(case.path),
        timeout=30,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
            negative_data_rejection,
            refused_only_as_documented,
            allow_header_conformance,
            unsupported_method,
        ],
    )
