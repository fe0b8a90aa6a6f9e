"""schemathesis over ``/openapi.json`` against a real server on each store (issue 8): whatever
a client sends, no 500, and every answer matches the status codes, media types and schemas the
document declares. Bounded for CI: a few examples per operation."""

from __future__ import annotations

from typing import Any

import schemathesis
from contract_server import ADMIN_TOKEN, Server
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import store_from_url

MAX_EXAMPLES = 10


def _document() -> dict[str, Any]:
    # The document does not depend on the store: build it from an app over an unopened one.
    app = create_app(Settings(admin_token=ADMIN_TOKEN), store_from_url("sqlite:///unused.db"))
    return app.openapi()


schema = schemathesis.openapi.from_dict(_document())


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: Any, server: Server) -> None:
    if case.path.endswith("/lease") and isinstance(case.body, dict):
        case.body["wait_seconds"] = 0  # a long poll (20 s by default) would only make it slow
    case.call_and_validate(
        base_url=server.base_url,
        headers=server.headers_for(case.path),
        timeout=30,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
