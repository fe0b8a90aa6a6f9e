"""Every credential a tenant gives is sealed before it is stored and shown as *** and a
fingerprint on the way out: target headers (the documented ones and those marked secret), URL
user info and credential query parameters, broker URLs, notification targets, schedule templates
and their revisions, named credentials. Read back through every answer, the dashboard, the logs
and — the proof — every row of both stores, the plain value is nowhere."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from api_helpers import TenantKey, assert_problem, make_tenant
from cryptography.fernet import Fernet

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.node.wiring import build_target_validator
from duetime.store import Store

KEY = Fernet.generate_key().decode()
SECRETS = {
    "bearer": "Bearer tok-bearer-41f2c9",
    "signature": "sig-value-8a1b7d",
    "query": "qtok-55e0aa91",
    "userinfo": "pw-userinfo-7c33",
    "redis": "redis-pw-90d2e1",
    "amqp": "amqp-pw-1b5f0c",
    "template": "Bearer tmpl-tok-c0ffee",
    "template2": "Bearer tmpl-tok-decade",
    "declared": "Bearer decl-tok-ab12cd",
    "notify": "Bearer notify-tok-77aa11",
    "credential": "Bearer named-tok-3e3e3e",
    "basic": "basic-pw-5d5d5d",
}
SHOWN = re.compile(r"^\*\*\*[0-9a-f]{8}$")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        admin_token="test-admin-token",
        secret_keys=KEY,
        allow_private_targets=True,
        data_dir=tmp_path,
    )


@pytest.fixture
async def api(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, store, validate_target=build_target_validator(settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        yield c


@pytest.fixture
async def tenant(api: httpx.AsyncClient) -> TenantKey:
    made = await make_tenant(api, "acme")
    api.headers.update(made.headers)
    return made


def assert_hidden(text: str, where: str) -> None:
    for name, secret in SECRETS.items():
        token = secret.removeprefix("Bearer ")
        assert token not in text, f"{name} secret shown in {where}"
    assert "dtenc" not in text, f"a sealed value shown in {where}"


async def test_no_credential_is_stored_or_shown_anywhere(
    api: httpx.AsyncClient,
    tenant: TenantKey,
    stored: Callable[[], Awaitable[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    answers: list[str] = []

    async def call(method: str, path: str, status: int, **kwargs: object) -> dict[str, object]:
        resp = await api.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert resp.status_code == status, resp.text
        answers.append(resp.text)
        return resp.json() if resp.content else {}

    headers = {
        "Authorization": SECRETS["bearer"],
        "X-Sig": SECRETS["signature"],
        "X-Trace": "visible-1",
    }
    task = await call(
        "POST",
        "/v1/tasks",
        201,
        json={
            "idempotency_key": "with-secrets",
            "target": {
                "type": "http",
                "url": f"https://hook.example/in?token={SECRETS['query']}&page=2",
                "headers": headers,
                "secret_headers": ["x-sig"],
            },
        },
    )
    shown = task["target"]
    assert isinstance(shown, dict)
    assert SHOWN.match(shown["headers"]["Authorization"])
    assert SHOWN.match(shown["headers"]["X-Sig"])
    assert shown["headers"]["X-Trace"] == "visible-1"
    assert re.fullmatch(r"https://hook\.example/in\?token=\*\*\*[0-9a-f]{8}&page=2", shown["url"])
    # The same request again is the same task (its fingerprint holds no secret either).
    again = await call(
        "POST",
        "/v1/tasks",
        200,
        json={
            "idempotency_key": "with-secrets",
            "target": {
                "type": "http",
                "url": f"https://hook.example/in?token={SECRETS['query']}&page=2",
                "headers": headers,
                "secret_headers": ["x-sig"],
            },
        },
    )
    assert again["id"] == task["id"]
    other = dict(headers, Authorization="Bearer another-token-99")
    conflict = await api.post(
        "/v1/tasks",
        json={
            "idempotency_key": "with-secrets",
            "target": {"type": "http", "url": "https://hook.example/in", "headers": other},
        },
    )
    assert conflict.status_code == 409

    userinfo = await call(
        "POST",
        "/v1/tasks",
        201,
        json={
            "target": {"type": "http", "url": f"https://bob:{SECRETS['userinfo']}@hook.example/"}
        },
    )
    assert re.fullmatch(r"https://bob:\*\*\*[0-9a-f]{8}@hook\.example/", userinfo["target"]["url"])
    for target in (
        {
            "type": "redis",
            "url": f"redis://127.0.0.1:6379/0?password={SECRETS['redis']}",
            "stream": "s",
        },
        {
            "type": "amqp",
            "url": f"amqp://guest:{SECRETS['amqp']}@127.0.0.1:5672/",
            "routing_key": "q",
        },
    ):
        await call("POST", "/v1/tasks", 201, json={"target": target})

    template = {
        "type": "http",
        "url": "https://hook.example/cron",
        "headers": {"Authorization": SECRETS["template"]},
    }
    schedule = await call(
        "POST", "/v1/schedules", 201, json={"every": "PT1H", "task": {"target": template}}
    )
    sid = schedule["id"]
    changed = {**template, "headers": {"Authorization": SECRETS["template2"]}}
    await call("PATCH", f"/v1/schedules/{sid}", 200, json={"task": {"target": changed}})
    declared = {
        "every": "PT1H",
        "task": {"target": {**template, "headers": {"Authorization": SECRETS["declared"]}}},
    }
    await call("PUT", "/v1/schedules/by-key/nightly", 201, json=declared)
    await call("PUT", "/v1/schedules/by-key/nightly", 200, json=declared)
    revisions = await call("GET", f"/v1/schedules/{sid}/revisions", 200)
    [update, create] = revisions["items"]
    before = update["before"]["task"]["target"]["headers"]["Authorization"]
    after = update["after"]["task"]["target"]["headers"]["Authorization"]
    assert SHOWN.match(before) and SHOWN.match(after) and before != after
    assert create["after"]["task"]["target"]["headers"]["Authorization"] == before
    nightly = await call("GET", "/v1/schedules/by-key/nightly", 200)
    unchanged = await call("GET", f"/v1/schedules/{nightly['id']}/revisions", 200)
    assert len(unchanged["items"]) == 1, "declaring the same credential again changes nothing"

    notify_target = {
        "type": "http",
        "url": "https://hook.example/harm",
        "headers": {"Authorization": SECRETS["notify"]},
    }
    await call(
        "PUT",
        "/v1/tenant/notifications",
        200,
        json={"events": ["task.dead_lettered"], "target": notify_target},
    )
    await call("GET", "/v1/tenant/notifications", 200)
    made = await call(
        "PUT",
        "/v1/credentials/billing-api",
        201,
        json={"kind": "header", "header": "Authorization", "value": SECRETS["credential"]},
    )
    assert made["name"] == "billing-api" and made["kind"] == "header"
    assert SHOWN.match(str(made["fingerprint"]))
    await call(
        "PUT",
        "/v1/credentials/legacy",
        201,
        json={"kind": "basic", "username": "svc", "password": SECRETS["basic"]},
    )

    for path in (
        f"/v1/tasks/{task['id']}",
        "/v1/tasks",
        "/v1/schedules",
        f"/v1/schedules/{sid}",
        "/v1/credentials",
        "/v1/credentials/billing-api",
        "/v1/history",
        f"/v1/history?schedule_id={sid}",
    ):
        await call("GET", path, 200)
    cookie = {"Cookie": f"duetime_ui_key={tenant.api_key}"}
    for page in (f"/ui/tasks/{task['id']}", f"/ui/schedules/{sid}", "/ui/credentials"):
        resp = await api.get(page, headers=cookie)
        assert resp.status_code == 200, (page, resp.text[:300])
        answers.append(resp.text)
    assert "billing-api" in answers[-1] and made["fingerprint"] in answers[-1]

    for i, text in enumerate(answers):
        assert_hidden(text, f"answer {i}")
    assert_hidden("\n".join(r.getMessage() for r in caplog.records), "the logs")
    raw = await stored()
    for name, secret in SECRETS.items():
        assert secret.removeprefix("Bearer ") not in raw, f"{name} secret stored in plain"
    assert raw.count("dtenc2.") >= 9, "each credential is stored sealed"


async def test_a_target_given_a_sealed_value_is_refused(
    api: httpx.AsyncClient, tenant: TenantKey
) -> None:
    made = await api.post(
        "/v1/tasks",
        json={
            "target": {
                "type": "http",
                "url": "https://hook.example/",
                "headers": {"X-Api-Key": "k-0123456789"},
            }
        },
    )
    assert made.status_code == 201
    sealed = "dtenc2.0123abcd.0123456789abcdef.gAAAAABfake-token_value"
    resp = await api.post(
        "/v1/tasks",
        json={"target": {"type": "http", "url": "https://hook.example/", "headers": {"A": sealed}}},
    )
    assert_problem(resp, 422, "target.headers.A")


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (
            {"type": "http", "url": "https://u:p@h.example/", "headers": {"authorization": "x"}},
            "target.headers",
        ),
        (
            {"type": "http", "url": "https://u:p@h.example/", "auth": {"credential": "c"}},
            "target.auth",
        ),
        (
            {"type": "http", "url": "https://h.example/", "secret_headers": ["X-Nope"]},
            "target.secret_headers",
        ),
        ({"type": "http", "url": "https://h.example/", "auth": {"saml": {}}}, "target.auth"),
    ],
)
async def test_conflicting_or_unknown_credentials_are_a_422_naming_the_field(
    api: httpx.AsyncClient, tenant: TenantKey, target: dict[str, object], field: str
) -> None:
    assert_problem(await api.post("/v1/tasks", json={"target": target}), 422, field)


@pytest.mark.parametrize(
    ("url", "kind", "param"),
    [
        ("redis://127.0.0.1:6379/0?ssl_keyfile=/etc/shadow", "redis", "ssl_keyfile"),
        ("redis://127.0.0.1:6379/0?socket_timeout=1", "redis", "socket_timeout"),
        ("amqp://127.0.0.1:5672/?keyfile=/etc/shadow", "amqp", "keyfile"),
        ("nats://127.0.0.1:4222?name=x", "nats", "name"),
    ],
)
async def test_a_broker_url_takes_only_the_query_parameters_duetime_documents(
    api: httpx.AsyncClient, tenant: TenantKey, url: str, kind: str, param: str
) -> None:
    target = {"type": kind, "url": url, "stream": "s", "routing_key": "q", "subject": "a"}
    target = {k: v for k, v in target.items() if k in {"type", "url", _FIELD[kind]}}
    resp = await api.post("/v1/tasks", json={"target": target})
    body = assert_problem(resp, 422, "target.url")
    assert repr(param) in str(body["detail"])


async def test_documented_broker_parameters_are_taken(
    api: httpx.AsyncClient, tenant: TenantKey
) -> None:
    for target in (
        {"type": "redis", "url": "redis://127.0.0.1:6379/?db=2&protocol=3", "stream": "s"},
        {"type": "amqp", "url": "amqp://127.0.0.1:5672/?heartbeat=30&name=app", "routing_key": "q"},
    ):
        resp = await api.post("/v1/tasks", json={"target": target})
        assert resp.status_code == 201, resp.text
    bad = {"type": "redis", "url": "redis://127.0.0.1:6379/?db=two", "stream": "s"}
    assert "'db'" in str(
        assert_problem(await api.post("/v1/tasks", json={"target": bad}), 422)["detail"]
    )


_FIELD = {"redis": "stream", "amqp": "routing_key", "nats": "subject"}
