"""Queue limits and tenant quotas edited from the dashboard: validated by the API's own models
(a value the API refuses is refused with the same words, next to its field, and nothing
changes), saved as the API saves them, posted only from this dashboard."""

from __future__ import annotations

import re

import httpx
from ui_helpers import ADMIN_TOKEN, Admin, Tenant, create, flash, get_json, page, post_form

LIMITS = {
    "max_concurrency": "",
    "rate_limit_per_second": "",
    "burst": "",
    "max_concurrency_per_key": "",
}
ADMIN_BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _field_error(html: str, name: str) -> str:
    found = re.search(rf'<span class="field-error" id="err-{name}">([^<]*)</span>', html)
    assert found is not None, f"no error shown for {name}"
    return found.group(1)


async def test_queue_limits_are_edited_with_the_apis_validation(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    await create(client, acme, queue="reports")
    put = await client.put(
        "/v1/queues/reports",
        json={"max_concurrency": 3, "retention": {"failed": "P3D"}},
        headers=acme.bearer,
    )
    assert put.status_code == 200, put.text
    form = await page(client, acme, "/ui/queues?edit=reports")
    assert 'action="/ui/queues/reports/settings"' in form
    assert 'name="max_concurrency" value="3"' in form

    refused = await post_form(
        client, acme, "/ui/queues/reports/settings", {**LIMITS, "max_concurrency": "0"}
    )
    assert refused.status_code == 422
    said = _field_error(refused.text, "max_concurrency")
    api = await client.put("/v1/queues/reports", json={"max_concurrency": 0}, headers=acme.bearer)
    assert api.status_code == 422 and said in api.text  # the API's words
    assert 'value="0"' in refused.text and 'aria-invalid="true"' in refused.text  # as typed

    typo = await post_form(
        client, acme, "/ui/queues/reports/settings", {**LIMITS, "max_concurrency": "ten"}
    )
    assert "valid integer" in _field_error(typo.text, "max_concurrency")
    burst = await post_form(client, acme, "/ui/queues/reports/settings", {**LIMITS, "burst": "5"})
    assert (
        _field_error(burst.text, "burst")
        == "burst needs rate_limit_per_second (it sizes that bucket)"
    )
    queue = await get_json(client, acme, "/v1/queues/reports")
    assert queue["max_concurrency"] == 3  # nothing changed

    saved = await post_form(
        client,
        acme,
        "/ui/queues/reports/settings",
        {"max_concurrency": "8", "rate_limit_per_second": "2.5", "burst": "5",
         "max_concurrency_per_key": "", "paused": "on", "back": "/ui/queues"},
    )  # fmt: skip
    assert saved.status_code == 303 and flash(saved) == "queue reports: settings saved"
    queue = await get_json(client, acme, "/v1/queues/reports")
    assert (queue["max_concurrency"], queue["rate_limit_per_second"], queue["burst"]) == (8, 2.5, 5)
    assert queue["paused"] is True and queue["max_concurrency_per_key"] is None
    assert queue["retention"]["failed"] == "P3D"  # not part of the form: kept

    cleared = await post_form(client, acme, "/ui/queues/reports/settings", LIMITS)
    assert cleared.status_code == 303
    queue = await get_json(client, acme, "/v1/queues/reports")
    assert (queue["max_concurrency"], queue["paused"]) == (None, False)

    forged = await client.post(
        "/ui/queues/reports/settings",
        data={**LIMITS, "max_concurrency": "1"},
        headers={**acme.cookie, "Origin": "https://evil.example"},
    )
    assert forged.status_code == 403
    assert (await get_json(client, acme, "/v1/queues/reports"))["max_concurrency"] is None
    bad_name = await post_form(client, acme, "/ui/queues/bad%20name/settings", LIMITS)
    assert bad_name.status_code == 422


async def test_tenant_quotas_are_edited_by_the_admin_only(
    client: httpx.AsyncClient, admin: Admin, acme: Tenant, globex: Tenant
) -> None:
    admin = admin.viewing(acme.id)
    form = await page(client, admin, f"/ui/tenants?edit={globex.id}")
    assert f'action="/ui/tenants/{globex.id}/quotas"' in form

    refused = await post_form(
        client, admin, f"/ui/tenants/{globex.id}/quotas",
        {"max_pending_tasks": "-1", "weight": "0", "max_creates_per_second": "fast"},
    )  # fmt: skip
    assert refused.status_code == 422
    said = _field_error(refused.text, "weight")
    api = await client.patch(
        f"/v1/admin/tenants/{globex.id}", json={"weight": 0}, headers=ADMIN_BEARER
    )
    assert api.status_code == 422 and said in api.text
    assert "greater than or equal to 0" in _field_error(refused.text, "max_pending_tasks")
    assert _field_error(refused.text, "max_creates_per_second")

    saved = await post_form(
        client, admin, f"/ui/tenants/{globex.id}/quotas",
        {"max_pending_tasks": "1000", "max_creates_per_second": "50", "max_concurrency": "",
         "max_schedules": "10", "weight": ""},
    )  # fmt: skip
    assert saved.status_code == 303 and flash(saved) == "tenant globex: quotas saved"
    got = await client.get(f"/v1/admin/tenants/{globex.id}", headers=ADMIN_BEARER)
    quotas = got.json()["quotas"]
    assert quotas["max_pending_tasks"] == 1000 and quotas["max_creates_per_second"] == 50
    assert quotas["max_schedules"] == 10 and quotas["max_concurrency"] is None
    assert quotas["weight"] == 1
    listed = await page(client, admin, "/ui/tenants")
    assert "/ 1,000" in listed  # the usage column reads the new quota

    by_key = await post_form(client, acme, f"/ui/tenants/{globex.id}/quotas", {"weight": "5"})
    assert by_key.status_code == 403
    assert await page(client, acme, f"/ui/tenants?edit={globex.id}", status=403)
    unknown = await post_form(client, admin, "/ui/tenants/nobody/quotas", {"weight": "5"})
    assert unknown.status_code == 404
