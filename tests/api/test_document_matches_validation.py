"""The OpenAPI document says what validation does: a request it calls valid is not refused for a
reason it does not give, and a 405 lists the methods it documents for the path."""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote

import httpx
from api_helpers import ADMIN, assert_problem, case

from duetime.api.fields import BRACKETED_HOST, NO_CONTROL_OR_EMPTY, url_has_scheme, url_pattern

WORKER = {"type": "worker"}


async def _document(api: httpx.AsyncClient) -> dict[str, Any]:
    resp = await api.get("/openapi.json")
    assert resp.status_code == 200
    return dict(resp.json())


async def test_a_405_lists_every_documented_method_of_the_path(api: httpx.AsyncClient) -> None:
    paths = (await _document(api))["paths"]
    for template, operations in paths.items():
        documented = sorted(m.upper() for m in operations)
        concrete = template.replace("{name}", "q").replace("{key}", "k")
        for name in ("task_id", "schedule_id", "lease_id", "tenant_id", "key_id"):
            concrete = concrete.replace("{" + name + "}", "0190f3a2-7c00-7000-8000-000000000000")
        with case(template):
            headers = ADMIN if template.startswith("/v1/admin/") else {}
            resp = await api.request("OPTIONS", concrete, headers=headers)  # no path has it
            assert resp.status_code == 405, resp.text
            assert resp.headers["allow"] == ", ".join(documented)


async def test_whole_number_floats_are_integers(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/tasks", json={"target": WORKER, "priority": 3.0})
    assert created.status_code == 201, created.text
    assert created.json()["priority"] == 3
    leased = await api.post(
        "/v1/queues/default/lease", json={"worker_id": "w", "max_tasks": 240.0, "wait_seconds": 0}
    )
    assert leased.status_code == 200, leased.text
    body = {"every": "PT1M", "catchup_max_runs": 5.0, "task": {"target": WORKER}}
    assert (await api.post("/v1/schedules", json=body)).status_code == 201
    # A fraction is no integer, and a string is no number.
    refused = await api.post("/v1/tasks", json={"target": WORKER, "priority": 2.5})
    assert_problem(refused, 422, "priority")
    refused = await api.post("/v1/tasks", json={"target": WORKER, "priority": "3"})
    assert_problem(refused, 422, "priority")


async def test_empty_time_filters_are_not_given(api: httpx.AsyncClient) -> None:
    await api.post("/v1/tasks", json={"target": WORKER})
    every = (await api.get("/v1/tasks")).json()["items"]
    for params in (
        {"run_after": ""},
        {"run_before": ""},
        {"run_after": "", "run_before": "", "cursor": ""},
    ):
        with case(params):
            resp = await api.get("/v1/tasks", params=params)
            assert resp.status_code == 200, resp.text
            assert resp.json()["items"] == every
    for params in ({"since": ""}, {"until": ""}):
        with case(params):
            assert (await api.get("/v1/history", params=params)).status_code == 200


async def test_patch_bodies_say_at_least_one_field_and_which_fields_take_no_null(
    api: httpx.AsyncClient,
) -> None:
    schemas = (await _document(api))["components"]["schemas"]
    task_patch, schedule_patch = schemas["TaskPatchIn"], schemas["SchedulePatchIn"]
    assert task_patch["minProperties"] == schedule_patch["minProperties"] == 1
    for model, field in [(task_patch, "priority"), (task_patch, "labels"),
                         (schedule_patch, "jitter_seconds"), (schedule_patch, "task")]:  # fmt: skip
        with case(field):
            text = str(model["properties"][field])
            assert "'null'" not in text  # documented as not nullable ...
    created = (await api.post("/v1/tasks", json={"target": WORKER})).json()
    resp = await api.patch(f"/v1/tasks/{created['id']}", json={"priority": None})
    assert_problem(resp, 422, "priority")  # ... and refused as the document says
    assert "'null'" in str(task_patch["properties"]["payload"]) or (
        task_patch["properties"]["payload"].get("default", "x") is None
    )  # a payload may be null
    ok = await api.patch(f"/v1/tasks/{created['id']}", json={"payload": None})
    assert ok.status_code == 200, ok.text


async def test_path_segments_and_urls_are_documented_as_checked(api: httpx.AsyncClient) -> None:
    document = await _document(api)
    for template, operations in document["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                if parameter["in"] == "path":
                    with case((template, parameter["name"])):
                        assert parameter["schema"]["pattern"]
    # A control character in an id is what the document calls invalid: a 422 naming it; a
    # clean id that names nothing is a 404.
    bell = quote("a\x07b")
    assert_problem(await api.get(f"/v1/tasks/{bell}"), 422, "task_id")
    assert_problem(await api.get("/v1/tasks/nope"), 404)
    target = document["components"]["schemas"]["HttpTarget"]["properties"]["url"]
    assert target["pattern"] == url_pattern(("http", "https"))
    for url, accepted in [
        ("https://example.com/h", True), ("HTTP://EXAMPLE.COM", True),
        ("http://[::1]:8080/x?y", True), ("https://user:pw@example.com", True),
        ("", False), ("https://", False), ("ftp://example.com", False),
        ("https://exa mple.com", False), ("https://example.com/\x00", False),
        ("https://example.com:port/", False),
    ]:  # fmt: skip
        with case(url):
            assert url_has_scheme(url, ("http", "https")) is accepted
            resp = await api.post("/v1/tasks", json={"target": {"type": "http", "url": url}})
            assert (resp.status_code == 201) is accepted, resp.text


async def test_the_id_prefix_rule_is_the_documented_pattern(api: httpx.AsyncClient) -> None:
    document = await _document(api)
    [parameter] = [
        p for p in document["paths"]["/v1/tasks"]["get"]["parameters"] if p["name"] == "id_prefix"
    ]
    pattern = re.compile(parameter["schema"]["pattern"])
    for text in ["0190", "0190F000", " 0190f000-7c ", "0190f000-", "0190f000-7c3a-7000-8",
                 "0190f0007c3a70008000000000000001", "0190f000-7c3a-7000-8000-000000000001",
                 "abc", "zzzz", "0190-f000", "0190f000-7c3a-7000-8000-0000000000001", "01 90", "",
                 "0190f000--"]:  # fmt: skip
        with case(text):
            documented = pattern.search(text) is not None
            resp = await api.get("/v1/tasks", params={"id_prefix": text})
            assert (resp.status_code == 200) is documented, resp.text


async def test_a_bracketed_host_that_is_no_ipv6_address_is_a_documented_refusal(
    api: httpx.AsyncClient,
) -> None:
    document = await _document(api)
    url = document["components"]["schemas"]["HttpTarget"]["properties"]["url"]
    assert {"field": "*", "detail": BRACKETED_HOST} in url["x-rules"]
    resp = await api.post(
        "/v1/tasks", json={"target": {"type": "http", "url": "http://[0F4fA6.6b65.F9]:80/"}}
    )
    assert assert_problem(resp, 422, "target.url")["errors"] == [
        {"field": "target.url", "detail": BRACKETED_HOST}
    ]


def _rules_of(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return [(rule["field"], rule["detail"]) for rule in schema.get("x-rules", ())]


async def test_what_json_schema_cannot_say_is_a_rule_of_the_document(
    api: httpx.AsyncClient,
) -> None:
    """A refusal of one field against another names a field and says words the document lists
    in its schema's ``x-rules``."""
    models = (await _document(api))["components"]["schemas"]
    slow = {"initial_delay_seconds": 10, "max_delay_seconds": 1}
    refused = [
        ("RetryIn", {"target": WORKER, "retry": slow}, "retry.max_delay_seconds"),
        (
            "TaskCreate",
            {"target": WORKER, "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 5},
            "delay_seconds",
        ),
        ("TaskCreate", {"target": WORKER, "depends_on": [str(uuid.uuid4())]}, "depends_on"),
    ]
    for model, body, field in refused:
        with case(field):
            problem = assert_problem(await api.post("/v1/tasks", json=body), 422, field)
            [error] = problem["errors"]  # type: ignore[misc]
            detail = error["detail"]
            leaf = field.rsplit(".", 1)[-1]
            assert any(
                name == leaf and detail.startswith(start)
                for name, start in _rules_of(models[model])
            ), (detail, _rules_of(models[model]))
    # Text a field's own pattern refuses is no rule: the pattern says it.
    labels = models["TaskCreate"]["properties"]["labels"]["patternProperties"]
    assert all(value["pattern"] == NO_CONTROL_OR_EMPTY for value in labels.values())
    assert_problem(
        await api.post("/v1/tasks", json={"target": WORKER, "labels": {"a": "x\x0b"}}),
        422,
        "labels.a",
    )
