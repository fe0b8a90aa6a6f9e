"""Problem responses become typed errors that are also duetime.errors classes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from duetime import errors
from duetime.sdk import (
    ApiConflict,
    ApiError,
    ApiNotFound,
    ApiStaleLease,
    ApiUnauthorized,
    ApiUnavailable,
    ApiValidationError,
    AsyncClient,
    TransportError,
)
from duetime.sdk.errors import error_from_response


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": f"urn:duetime:problem:{slug}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": "/v1/tasks/x",
        **extra,
    }


async def raised_by(response: httpx.Response) -> ApiError:
    transport = httpx.MockTransport(lambda request: response)
    async with AsyncClient("http://duetime.test", "k", retries=0, transport=transport) as client:
        with pytest.raises(ApiError) as caught:
            await client.get_task("x")
    return caught.value


@pytest.mark.parametrize(
    ("status", "slug", "sdk_class", "core_class"),
    [
        (400, "malformed-json", ApiValidationError, errors.ValidationError),
        (401, "unauthorized", ApiUnauthorized, errors.Unauthorized),
        (403, "forbidden", ApiUnauthorized, errors.Unauthorized),
        (404, "not-found", ApiNotFound, errors.NotFound),
        (409, "conflict", ApiConflict, errors.Conflict),
        (409, "stale-lease", ApiStaleLease, errors.StaleLease),
        (413, "payload-too-large", ApiValidationError, errors.ValidationError),
        (422, "validation", ApiValidationError, errors.ValidationError),
        (503, "store-unavailable", ApiUnavailable, errors.StoreUnavailable),
    ],
)
async def test_status_maps_to_typed_error(
    status: int, slug: str, sdk_class: type[ApiError], core_class: type[errors.DuetimeError]
) -> None:
    body = problem(status, slug, "Title", "what went wrong")
    error = await raised_by(httpx.Response(status, json=body))
    assert type(error) is sdk_class
    assert isinstance(error, core_class)
    assert isinstance(error, errors.DuetimeError)
    assert (error.status, error.title, error.detail) == (status, "Title", "what went wrong")
    assert error.type == f"urn:duetime:problem:{slug}"
    assert error.instance == "/v1/tasks/x"
    assert error.problem == body


async def test_plain_conflict_is_not_a_stale_lease() -> None:
    error = await raised_by(httpx.Response(409, json=problem(409, "conflict", "Conflict", "done")))
    assert not isinstance(error, errors.StaleLease)


async def test_validation_problem_names_the_field_and_every_error() -> None:
    body = problem(
        422,
        "validation",
        "Invalid request",
        "target.url: must be an absolute URL (and 1 more)",
        field="target.url",
        errors=[
            {"field": "target.url", "detail": "must be an absolute URL"},
            {"field": "priority", "detail": "too big"},
        ],
    )
    error = await raised_by(
        httpx.Response(422, json=body, headers={"content-type": "application/problem+json"})
    )
    assert isinstance(error, errors.ValidationError)
    assert error.field == "target.url"
    assert [e["field"] for e in error.errors] == ["target.url", "priority"]
    assert str(error) == (
        "422 Invalid request: target.url: must be an absolute URL (and 1 more) (field: target.url)"
    )


def test_fastapi_shaped_validation_body_is_understood() -> None:
    body = {"detail": [{"loc": ["body", "target", "url"], "msg": "Field required", "type": "x"}]}
    error = error_from_response(422, "Unprocessable Entity", body)
    assert isinstance(error, ApiValidationError)
    assert error.field == "target.url"
    assert error.detail == "target.url: Field required"
    assert error.title == "Unprocessable Entity"


async def test_unavailable_carries_retry_after() -> None:
    body = problem(503, "store-unavailable", "Store unavailable", "retry later")
    error = await raised_by(httpx.Response(503, json=body, headers={"Retry-After": "2"}))
    assert isinstance(error, ApiUnavailable)
    assert error.retry_after == 2.0
    dated = error_from_response(
        503, "Service Unavailable", None, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    assert isinstance(dated, ApiUnavailable) and dated.retry_after == 0.0
    none = error_from_response(503, "Service Unavailable", None, {})
    assert isinstance(none, ApiUnavailable) and none.retry_after is None


async def test_a_body_that_is_not_a_problem_still_gives_a_useful_error() -> None:
    error = await raised_by(httpx.Response(502, text="<html>bad gateway</html>"))
    assert type(error) is ApiError
    assert error.status == 502
    assert error.title == "Bad Gateway"
    assert error.detail == "<html>bad gateway</html>"
    assert "502 Bad Gateway" in str(error)


async def test_no_answer_is_a_transport_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    for handler, words in ((refuse, "cannot reach http://duetime.test"), (slow, "timed out")):
        transport = httpx.MockTransport(handler)
        async with AsyncClient("http://duetime.test", retries=0, transport=transport) as client:
            with pytest.raises(TransportError) as caught:
                await client.get_task("x")
        assert words in str(caught.value)
        assert isinstance(caught.value, errors.DuetimeError)
        assert not isinstance(caught.value, ApiError)


async def test_429_is_a_typed_error_naming_the_limit() -> None:
    from duetime.sdk import ApiTooManyRequests

    body = problem(429, "too-many-requests", "Too many requests", "slow down")
    body["limit"] = "long_polls_per_tenant"
    error = await raised_by(httpx.Response(429, json=body, headers={"Retry-After": "3"}))
    assert isinstance(error, ApiTooManyRequests)
    assert isinstance(error, errors.TooManyRequests)
    assert (error.limit, error.retry_after, error.status) == ("long_polls_per_tenant", 3.0, 429)
