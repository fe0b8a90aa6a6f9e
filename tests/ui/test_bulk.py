"""Cancel and replay many tasks from the list: the selected ones, or every one matching the
list's filter and searches — counted and confirmed first, then changed through the bulk API's
machinery, within the caller's tenant, and never beyond what was confirmed."""

from __future__ import annotations

import re
from html import unescape

import httpx
import pytest
from ui_helpers import Tenant, create, dead_letter, flash, get_json, page, post_form

from duetime.api.ui import views_bulk


async def _status(client: httpx.AsyncClient, tenant: Tenant, task_id: str) -> str:
    return str((await get_json(client, tenant, f"/v1/tasks/{task_id}"))["status"])


def _hidden(html: str) -> dict[str, list[str]]:
    """The confirmation form's hidden fields."""
    form = html[html.index('action="/ui/tasks/bulk"') :]
    found: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form):
        found.setdefault(name, []).append(unescape(value))
    return found


async def test_selected_tasks_are_cancelled_after_a_confirmation(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    made = [(await create(client, acme, queue="q", delay_seconds=600))["id"] for _ in range(3)]
    listed = await page(client, acme, "/ui/tasks?queue=q")
    for task_id in made:  # a box per row, in the bulk form, and a cancel button per row
        assert f'form="bulk" name="pick" value="{task_id}" id="pick-{task_id}"' in listed
        assert f'action="/ui/tasks/{task_id}/cancel"' in listed

    asked = await post_form(
        client, acme, "/ui/tasks/confirm",
        {"do": "cancel:selected", "pick": made[:2], "queue": "q", "back": "/ui/tasks?queue=q"},
    )  # fmt: skip
    assert asked.status_code == 200
    assert "Cancel 2 tasks?" in asked.text and 'id="confirm"' in asked.text
    assert [await _status(client, acme, t) for t in made] == ["scheduled"] * 3  # not yet
    fields = _hidden(asked.text)
    assert fields["pick"] == made[:2] and fields["do"] == ["cancel:selected"]

    done = await post_form(client, acme, "/ui/tasks/bulk", fields)
    assert done.status_code == 303 and done.headers["location"] == "/ui/tasks?queue=q"
    assert flash(done) == "cancelled 2 task(s)"
    assert [await _status(client, acme, t) for t in made] == ["cancelled", "cancelled", "scheduled"]
    again = await post_form(client, acme, "/ui/tasks/bulk", fields)
    assert flash(again) == "cancelled 0 task(s); 2 had moved on"


async def test_a_confirmation_names_what_is_wrong(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    none = await post_form(client, acme, "/ui/tasks/confirm", {"do": "cancel:selected"})
    assert none.status_code == 422 and "no task selected" in none.text
    bad = await post_form(client, acme, "/ui/tasks/confirm", {"do": "delete:everything"})
    assert bad.status_code == 422 and "choose cancel or replay" in bad.text
    failed = await post_form(
        client, acme, "/ui/tasks/confirm", {"do": "cancel:matching", "status": "failed"}
    )
    assert failed.status_code == 422 and "cancel cannot change failed tasks" in failed.text
    by_id = await post_form(
        client, acme, "/ui/tasks/confirm", {"do": "replay:matching", "id": "01"}
    )
    assert by_id.status_code == 422 and "select them" in by_id.text
    bad_payload = await post_form(
        client, acme, "/ui/tasks/confirm", {"do": "replay:matching", "payload": "x = 1"}
    )
    assert bad_payload.status_code == 422 and "write payload." in bad_payload.text
    foreign = await post_form(client, acme, "/ui/tasks/bulk", {"do": "replay:matching"})
    assert flash(foreign) == "!the confirmation is incomplete: ask again"
    resp = await client.post(
        "/ui/tasks/confirm", data={"do": "cancel:selected", "pick": "x"}, headers=acme.cookie
    )
    assert resp.status_code == 403  # no Origin: not from this dashboard


async def test_every_matching_task_is_replayed_as_counted(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    gateway = await dead_letter(client, acme, "crm", "HTTP 502 Bad Gateway", count=3)
    other = await dead_letter(client, acme, "crm", "connect timeout")
    theirs = await dead_letter(client, globex, "crm", "HTTP 502 Bad Gateway")
    filters = {"queue": "crm", "error": "bad gateway"}

    asked = await post_form(client, acme, "/ui/tasks/confirm", {"do": "replay:matching", **filters})
    assert asked.status_code == 200, asked.text
    assert "Replay 3 tasks?" in asked.text and "status failed" in asked.text
    fields = _hidden(asked.text)
    assert fields["count"] == ["3"] and fields["error"] == ["bad gateway"]

    later = await dead_letter(client, acme, "crm", "HTTP 502 Bad Gateway")  # after the count
    done = await post_form(client, acme, "/ui/tasks/bulk", fields)
    assert flash(done) == "replayed 3 matching task(s)"
    assert {await _status(client, acme, t) for t in gateway} == {"ready"}
    assert await _status(client, acme, other[0]) == "failed"  # another error
    assert await _status(client, acme, later[0]) == "failed"  # made after the confirmation
    assert await _status(client, globex, theirs[0]) == "failed"  # another tenant's


async def test_all_matching_acts_on_at_most_the_cap(
    client: httpx.AsyncClient, acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views_bulk, "MAX_MATCHING", 3)
    made = [(await create(client, acme, queue="big", payload={"n": n}))["id"] for n in range(5)]
    asked = await post_form(
        client, acme, "/ui/tasks/confirm", {"do": "cancel:matching", "queue": "big"}
    )
    assert "Cancel 3 tasks?" in asked.text and "more than 3 match" in asked.text
    done = await post_form(client, acme, "/ui/tasks/bulk", _hidden(asked.text))
    assert flash(done) == "cancelled 3 matching task(s)"
    statuses = [await _status(client, acme, t) for t in made]
    assert statuses == ["ready", "ready", "cancelled", "cancelled", "cancelled"]  # the newest

    by_payload = await post_form(
        client, acme, "/ui/tasks/confirm",
        {"do": "cancel:matching", "queue": "big", "payload": "payload.n = 0"},
    )  # fmt: skip
    assert "Cancel 1 task?" in by_payload.text
    await post_form(client, acme, "/ui/tasks/bulk", _hidden(by_payload.text))
    assert [await _status(client, acme, t) for t in made[:2]] == ["cancelled", "ready"]
    nothing = await post_form(
        client, acme, "/ui/tasks/confirm", {"do": "cancel:matching", "queue": "nowhere"}
    )
    assert "No task to cancel" in nothing.text and 'action="/ui/tasks/bulk"' not in nothing.text
