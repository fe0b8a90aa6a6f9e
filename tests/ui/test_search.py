"""Searching the task list: the store's error-text and payload-path filters (on SQLite and
PostgreSQL alike), the search fields' parsing, and the list page that combines them with an id
prefix — always within the caller's tenant."""

from __future__ import annotations

import re

import httpx
import pytest
from ui_helpers import Tenant, create, dead_letter, page

from duetime.api.ui.search import error_search, id_search, payload_search
from duetime.errors import ValidationError
from duetime.store import Store
from duetime.types import PayloadMatch, TaskFilter

PAYLOADS = [
    {"customer_id": 42, "region": "eu"},
    {"customer_id": "42", "region": "us"},
    {"customer_id": 42.0, "order": {"lines": 3, "rush": True}},
    {"customer_id": 7, "order": {"lines": 1, "rush": 1}},
    {"customer_id": None},
    [42],
    "customer_id",
    {"order": [{"lines": 3}], "customer_id": {"id": 42}},
]


def _ids(tasks: list[object]) -> set[str]:
    return {t.id for t in tasks}  # type: ignore[attr-defined]


async def test_payload_path_equality_is_typed_on_every_store(
    client: httpx.AsyncClient, store: Store, acme: Tenant, globex: Tenant
) -> None:
    made = [(await create(client, acme, payload=p))["id"] for p in PAYLOADS]
    theirs = await create(client, globex, payload={"customer_id": 42})

    async def found(keys: tuple[str, ...], value_json: str) -> set[str]:
        query = TaskFilter(tenant_id=acme.id, payload_equals=PayloadMatch(keys, value_json))
        return _ids(await store.task_list(query))

    assert await found(("customer_id",), "42") == {made[0], made[2]}  # 42 and 42.0, not "42"
    assert await found(("customer_id",), '"42"') == {made[1]}
    assert await found(("customer_id",), "null") == {made[4]}  # present and null, not missing
    assert await found(("order", "rush"), "true") == {made[2]}  # true is not 1
    assert await found(("order", "rush"), "1") == {made[3]}
    assert await found(("order", "lines"), "3") == {made[2]}  # no array is looked into
    assert await found(("region",), '"EU"') == set()  # strings compare exactly
    assert theirs["id"] not in await found(("customer_id",), "42")
    one = TaskFilter(
        tenant_id=acme.id, payload_equals=PayloadMatch(("customer_id",), "42"), limit=1
    )
    assert len(await store.task_list(one)) == 1


async def test_error_text_search_ignores_case_on_every_store(
    client: httpx.AsyncClient, store: Store, acme: Tenant, globex: Tenant
) -> None:
    upstream = await dead_letter(client, acme, "crm", "HTTP 500: Upstream DOWN", count=2)
    timeout = await dead_letter(client, acme, "crm", "connect timeout after 10s")
    await dead_letter(client, globex, "crm", "HTTP 500: upstream down")
    fine = await create(client, acme)

    async def found(text: str, **more: object) -> set[str]:
        query = TaskFilter(tenant_id=acme.id, error_contains=text, **more)  # type: ignore[arg-type]
        return _ids(await store.task_list(query))

    assert await found("upstream down") == set(upstream)
    assert await found("TIMEOUT") == set(timeout)
    assert await found("") == {*upstream, *timeout}  # every task with an error
    assert fine["id"] not in await found("")
    assert await found("100%_") == set()  # no wildcard: % and _ are text
    limited = await store.task_list(
        TaskFilter(tenant_id=acme.id, error_contains="http 500", limit=1)
    )
    assert len(limited) == 1


def test_search_fields_take_only_what_they_describe() -> None:
    assert payload_search("payload.customer_id = 42") == PayloadMatch(("customer_id",), "42")
    assert payload_search(" payload.order.rush=true ") == PayloadMatch(("order", "rush"), "true")
    assert payload_search('payload.region = "eu"') == PayloadMatch(("region",), '"eu"')
    assert payload_search("payload.city = New York") == PayloadMatch(("city",), '"New York"')
    assert payload_search("payload.x = null") == PayloadMatch(("x",), "null")
    assert payload_search("  ") is None
    for bad, says in [
        ("customer_id = 42", "write payload."),
        ("payload.customer_id == 42", "write payload."),
        ("payload.customer_id > 42", "write payload."),
        ("payload.customer_id =", "nothing after"),
        ("payload.items.0 = 1", "not all digits"),
        ("payload.a..b = 1", "payload key ''"),
        ('payload.a = "open', "not a JSON string"),
        ("payload.a = [1]", "not an array or object"),  # nor taken as a bare string
        ("payload.a = {}", "not an array or object"),
        ('payload.a = say "hi"', "with quotes"),
        ("payload" + ".k" * 9 + " = 1", "at most 8 keys"),
    ]:
        with pytest.raises(ValidationError) as caught:
            payload_search(bad)
        assert says in caught.value.detail and caught.value.field == "payload", bad

    found = id_search("0190C3A2-7")
    assert found is not None and found.prefix == "0190c3a27"
    assert found.upper == "0190c3a2-8000-0000-0000-000000000000"
    assert found.matches("0190c3a2-7fff-7000-8000-000000000000")
    assert not found.matches("0190c3a2-8000-7000-8000-000000000000")
    assert found.cursor(None) == found.upper
    assert found.cursor("0190c3a2-0000-0000-0000-000000000000").startswith("0190c3a2-0")
    top = id_search("ffffffff-ffff-ffff-ffff-ffffffffffff")
    assert top is not None and top.upper is None
    for bad in ("xyz", "0190c3a2-7fff-7000-8000-0000000000001", "01 90"):
        with pytest.raises(ValidationError) as caught:
            id_search(bad)
        assert caught.value.field == "id"
    assert error_search("  Upstream  ") == "Upstream"
    with pytest.raises(ValidationError):
        error_search("x" * 201)


async def test_the_list_finds_by_id_prefix_error_and_payload(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    mine = [(await create(client, acme, name="sync", payload={"customer_id": n}))["id"]
            for n in range(3)]  # fmt: skip
    [dead] = await dead_letter(client, acme, "crm", "HTTP 502 from gateway")
    theirs = await create(client, globex, payload={"customer_id": 1})

    def rows(html: str) -> set[str]:
        return set(re.findall(r'href="/ui/tasks/([0-9a-f-]{36})"', html))

    assert rows(await page(client, acme, f"/ui/tasks?id={mine[1]}")) == {mine[1]}
    prefix = mine[2][:-6]  # UUIDv7s made together share their start
    shared = rows(await page(client, acme, f"/ui/tasks?id={prefix}"))
    assert mine[2] in shared and all(i.startswith(prefix) for i in shared)
    assert rows(await page(client, acme, f"/ui/tasks?id={theirs['id']}")) == set()
    assert rows(await page(client, acme, "/ui/tasks?error=gateway")) == {dead}
    by_payload = await page(client, acme, "/ui/tasks?payload=payload.customer_id+%3D+1")
    assert rows(by_payload) == {mine[1]}  # globex's customer 1 is not acme's
    combined = await page(client, acme, "/ui/tasks?name=sync&payload=payload.customer_id+%3D+2")
    assert rows(combined) == {mine[2]}

    bad = await page(client, acme, "/ui/tasks?payload=customer_id%3D1", status=422)
    assert "correct the payload field" in bad and "write payload.&lt;key&gt;" in bad
    assert 'value="customer_id=1"' in bad  # the form keeps what was typed, to correct it
    assert "an id is a task" in await page(client, acme, "/ui/tasks?id=nothex", status=422)
