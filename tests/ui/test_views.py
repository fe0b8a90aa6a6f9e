"""Every dashboard view renders what the store holds for the calling tenant — and nothing of
another tenant's — and every action changes what the JSON API then reports."""

from __future__ import annotations

import re

import httpx
from ui_helpers import (
    Admin,
    Tenant,
    create,
    dead_letter,
    flash,
    get_json,
    page,
    post_form,
)

NY_SCHEDULE = {
    "cron": "30 2 * * *",
    "timezone": "America/New_York",
    "task": {"name": "nightly", "queue": "reports", "target": {"type": "worker"}},
}


async def _schedule(client: httpx.AsyncClient, tenant: Tenant) -> str:
    resp = await client.post("/v1/schedules", json=NY_SCHEDULE, headers=tenant.bearer)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def test_views_show_the_tenants_work(client: httpx.AsyncClient, acme: Tenant) -> None:
    ok = await create(
        client, acme, name="send-receipt", queue="emails", labels={"team": "billing"},
        payload={"order": 1234},
    )  # fmt: skip
    dead = await dead_letter(client, acme, "crm", "HTTP 500: upstream down", count=3)
    await dead_letter(client, acme, "crm", "connect timeout", count=1)
    schedule_id = await _schedule(client, acme)

    overview = await page(client, acme, "/ui")
    assert re.search(r'class="count st-failed".*?<span class="n">4</span>', overview, re.S)
    assert re.search(r'class="count st-ready".*?<span class="n">1</span>', overview, re.S)
    assert overview.count('<figure class="chart">') == 3
    assert 'class="c-bad"' in overview  # the dead letters are charted
    assert '<td>crm</td><td class="num">4</td>' in overview  # the noisy queue

    queues = await page(client, acme, "/ui/queues")
    assert "<b>crm</b>" in queues and "<b>emails</b>" in queues
    assert 'class="d-failed"' in queues and 'class="d-ready"' in queues

    tasks = await page(client, acme, "/ui/tasks?status=failed")
    assert all(task_id in tasks for task_id in dead) and ok["id"] not in tasks
    by_label = await page(client, acme, "/ui/tasks?label=team:billing")
    assert ok["id"] in by_label and dead[0] not in by_label

    detail = await page(client, acme, f"/ui/tasks/{dead[0]}")
    assert "HTTP 500: upstream down" in detail and 'class="o-failed"' in detail
    assert "/retry" in detail and "/cancel" not in detail  # failed: replay, nothing to cancel
    assert "&#34;order&#34;: 1234" in await page(client, acme, f"/ui/tasks/{ok['id']}")

    letters = await page(client, acme, "/ui/dead-letters")
    groups = re.findall(r'<span class="n">(\d+)</span>\s*<pre class="error">([^<]*)</pre>', letters)
    assert groups == [("3", "HTTP 500: upstream down"), ("1", "connect timeout")]

    schedules = await page(client, acme, "/ui/schedules")
    assert schedule_id in schedules and "America/New_York" in schedules
    one = await page(client, acme, f"/ui/schedules/{schedule_id}")
    assert "DST changes ahead" in one and "DST gap" in one
    assert "create" in one  # its first revision

    workers = await page(client, acme, "/ui/workers")
    assert "w-1" in workers  # the worker that leased (and failed) the crm tasks


async def test_next_runs_across_the_march_change(client: httpx.AsyncClient, acme: Tenant) -> None:
    schedule_id = await _schedule(client, acme)
    html = await page(client, acme, f"/ui/schedules/{schedule_id}?after=2027-03-13&count=3")
    rows = re.findall(r"<tr( class=\"dst\")?><td class=\"mono\">([^<]*)<", html)
    assert [(bool(dst), when.strip()) for dst, when in rows] == [
        (False, "Sat 2027-03-13 02:30"),
        (True, "Sun 2027-03-14 03:00"),  # 02:30 does not exist that night: runs after the gap
        (False, "Mon 2027-03-15 02:30"),
    ]
    upcoming = await get_json(
        client, acme, f"/v1/schedules/{schedule_id}/upcoming?after=2027-03-13T05:00:00Z&count=3"
    )
    assert upcoming["items"][1]["note"] in html  # the same note as the API's
    bad = await page(client, acme, f"/ui/schedules/{schedule_id}?after=2027-02-30", status=422)
    assert "after" in bad


async def test_another_tenants_work_is_invisible(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    theirs = await create(client, globex, queue="globex-secret", name="their-job")
    [their_dead] = await dead_letter(client, globex, "globex-crm", "globex failure")
    their_schedule = await _schedule(client, globex)
    await create(client, acme, queue="mine")

    for path in ("/ui", "/ui/queues", "/ui/tasks", "/ui/dead-letters", "/ui/schedules"):
        html = await page(client, acme, path)
        for secret in (
            "globex-secret",
            "globex-crm",
            "globex failure",
            theirs["id"],
            their_schedule,
        ):
            assert secret not in html, (path, secret)
    await page(client, acme, f"/ui/tasks/{theirs['id']}", status=404)
    await page(client, acme, f"/ui/schedules/{their_schedule}", status=404)
    await page(client, acme, "/ui/tasks/not-a-uuid", status=404)

    # Actions on their work change nothing and say why.
    resp = await post_form(client, acme, f"/ui/tasks/{theirs['id']}/cancel")
    assert resp.status_code == 303 and flash(resp).startswith("!") and theirs["id"] in flash(resp)
    resp = await post_form(client, acme, "/ui/dead-letters/replay", {"id": [their_dead]})
    assert "replayed 0 task(s); 1 had moved on" in flash(resp)
    resp = await post_form(client, acme, f"/ui/schedules/{their_schedule}/pause", {"note": "x"})
    assert flash(resp).startswith("!")
    assert (await get_json(client, globex, f"/v1/tasks/{theirs['id']}"))["status"] == "ready"
    assert (await get_json(client, globex, f"/v1/tasks/{their_dead}"))["status"] == "failed"
    schedule = await get_json(client, globex, f"/v1/schedules/{their_schedule}")
    assert schedule["paused"] is False


async def test_task_actions(client: httpx.AsyncClient, acme: Tenant) -> None:
    waiting = await create(client, acme, delay_seconds=3600)
    resp = await post_form(
        client, acme, f"/ui/tasks/{waiting['id']}/cancel", {"back": "/ui/tasks?status=ready"}
    )
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/tasks?status=ready"
    assert flash(resp) == "task cancelled"
    assert (await get_json(client, acme, f"/v1/tasks/{waiting['id']}"))["status"] == "cancelled"
    # The next page shows the message once, then forgets it.
    with_flash = {"Cookie": f"duetime_ui_session={acme.session}; duetime_ui_flash=task%20cancelled"}
    shown = await client.get("/ui/tasks", headers=with_flash)
    assert '<div class="flash" role="status">task cancelled</div>' in shown.text
    assert "duetime_ui_flash=" in shown.headers["set-cookie"]

    again = await post_form(client, acme, f"/ui/tasks/{waiting['id']}/cancel")
    assert flash(again).startswith("!")  # terminal: the store's 409, as a message

    resp = await post_form(client, acme, f"/ui/tasks/{waiting['id']}/retry")
    assert flash(resp).startswith("task replayed")
    assert (await get_json(client, acme, f"/v1/tasks/{waiting['id']}"))["status"] == "ready"
    # A redirect never leaves the dashboard, whatever the form says.
    resp = await post_form(
        client, acme, f"/ui/tasks/{waiting['id']}/cancel", {"back": "https://evil.example/"}
    )
    assert resp.headers["location"] == f"/ui/tasks/{waiting['id']}"


async def test_dead_letter_replay_and_cancel_by_group(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    dead = await dead_letter(client, acme, "crm", "HTTP 503", count=3)
    resp = await post_form(client, acme, "/ui/dead-letters/replay", {"id": dead})
    assert flash(resp) == "replayed 3 task(s)"
    for task_id in dead:
        assert (await get_json(client, acme, f"/v1/tasks/{task_id}"))["status"] == "ready"
    assert "No dead letter" in await page(client, acme, "/ui/dead-letters")

    resp = await post_form(client, acme, "/ui/dead-letters/cancel", {"id": dead[:2]})
    assert flash(resp) == "cancelled 2 task(s)"
    statuses = [(await get_json(client, acme, f"/v1/tasks/{t}"))["status"] for t in dead]
    assert statuses == ["cancelled", "cancelled", "ready"]
    empty = await post_form(client, acme, "/ui/dead-letters/replay", {})
    assert flash(empty) == "!no task chosen"


async def test_queue_pause_and_resume(client: httpx.AsyncClient, acme: Tenant) -> None:
    await create(client, acme, queue="reports")
    put = await client.put("/v1/queues/reports", json={"max_concurrency": 3}, headers=acme.bearer)
    assert put.status_code == 200
    resp = await post_form(client, acme, "/ui/queues/reports/pause")
    assert flash(resp) == "queue reports paused"
    queue = await get_json(client, acme, "/v1/queues/reports")
    assert queue["paused"] is True and queue["max_concurrency"] == 3  # other settings kept
    assert "/ui/queues/reports/resume" in await page(client, acme, "/ui/queues")
    leased = await client.post(
        "/v1/queues/reports/lease", json={"wait_seconds": 0, "worker_id": "w"}, headers=acme.bearer
    )
    assert leased.json()["leases"] == []  # paused means paused for claims too
    resp = await post_form(client, acme, "/ui/queues/reports/resume")
    assert flash(resp) == "queue reports resumed"
    assert (await get_json(client, acme, "/v1/queues/reports"))["paused"] is False
    bad = await post_form(client, acme, "/ui/queues/bad%20name/pause")
    assert flash(bad).startswith("!a queue name")


async def test_schedule_pause_resume_trigger(client: httpx.AsyncClient, acme: Tenant) -> None:
    schedule_id = await _schedule(client, acme)
    base = f"/ui/schedules/{schedule_id}"
    resp = await post_form(client, acme, f"{base}/pause", {"note": "vendor outage"})
    assert flash(resp) == "schedule paused: vendor outage"
    got = await get_json(client, acme, f"/v1/schedules/{schedule_id}")
    assert got["paused"] is True and got["pause_note"] == "vendor outage"

    resp = await post_form(client, acme, f"{base}/trigger")
    assert flash(resp).startswith("triggered: task ")
    ticks = await get_json(client, acme, f"/v1/schedules/{schedule_id}/ticks")
    assert [t["outcome"] for t in ticks["items"]] == ["triggered"]

    bad = await post_form(client, acme, f"{base}/resume", {"catchup": "sometimes"})
    assert flash(bad).startswith("!catchup is")
    resp = await post_form(client, acme, f"{base}/resume", {"catchup": "none"})
    assert flash(resp) == "schedule resumed (catch-up: none)"
    revisions = await get_json(client, acme, f"/v1/schedules/{schedule_id}/revisions")
    actions = [r["action"] for r in revisions["items"]]
    assert actions == ["resume", "pause", "create"]
    key_ids = {r["actor"] for r in revisions["items"]}
    assert len(key_ids) == 1 and None not in key_ids  # the dashboard records the key, as the API
    html = await page(client, acme, base)
    assert "vendor outage" in html and "triggered" in html


async def test_lists_are_cursor_paged(client: httpx.AsyncClient, acme: Tenant) -> None:
    made = [(await create(client, acme, queue="bulk"))["id"] for _ in range(55)]
    first = await page(client, acme, "/ui/tasks?queue=bulk")
    assert first.count('href="/ui/tasks/') == 50
    next_url = re.search(r'<a class="next" href="([^"]+)"', first)
    assert next_url is not None
    second = await page(client, acme, next_url.group(1).replace("&amp;", "&"))
    assert second.count('href="/ui/tasks/') == 5
    shown = set(re.findall(r'href="/ui/tasks/([0-9a-f-]{36})"', first + second))
    assert shown == set(made)
    assert 'class="next"' not in second and "First page" in second
    bad = await page(client, acme, "/ui/tasks?cursor=garbage", status=422)
    assert "cursor" in bad


async def test_bad_filters_are_named(client: httpx.AsyncClient, acme: Tenant) -> None:
    bogus = await page(client, acme, "/ui/tasks?status=bogus", 422)
    assert "correct the status field" in bogus and "unknown status &#39;bogus&#39;" in bogus
    assert "window" in await page(client, acme, "/ui?window=2d", 422)
    assert "seen" in await page(client, acme, "/ui/workers?seen=forever", 422)


async def test_task_page_shows_an_attempts_logs_escaped(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    made = await create(client, acme, queue="logs", name="job")
    resp = await client.post(
        "/v1/queues/logs/lease", json={"wait_seconds": 0, "worker_id": "w"}, headers=acme.bearer
    )
    (lease,) = resp.json()["leases"]
    done = await client.post(
        f"/v1/leases/{lease['lease_id']}/complete",
        json={"logs": "step <1> done\nstep 2"},
        headers=acme.bearer,
    )
    assert done.status_code == 200, done.text
    detail = await page(client, acme, f"/ui/tasks/{made['id']}")
    assert '<summary class="small">Logs</summary>' in detail
    assert "step &lt;1&gt; done\nstep 2" in detail
    assert "Response</summary>" not in detail  # a worker attempt has no response


async def test_every_list_refreshes_live_with_a_pause_toggle(
    client: httpx.AsyncClient, acme: Tenant, admin: Admin
) -> None:
    await create(client, acme, queue="live")
    for session, path in (
        (acme, "/ui"),
        (acme, "/ui/queues"),
        (acme, "/ui/tasks"),
        (acme, "/ui/dead-letters"),
        (acme, "/ui/schedules"),
        (acme, "/ui/workers"),
        (acme, "/ui/targets"),
        (acme, "/ui/workflows"),
        (acme, "/ui/credentials"),
        (admin, "/ui/tenants"),
    ):
        html = await page(client, session, path)
        live = re.search(r'<div id="live" hx-get="([^"]+)" hx-trigger="refresh"', html)
        assert live is not None and live.group(1).startswith(path), path
        assert 'id="live-toggle" aria-pressed="false"' in html, path
        assert '<script src="/ui/static/live.js" defer></script>' in html
        # What a refresh must keep lies outside the live part: forms being filled, panels.
        after_live = html[html.index('<div id="live"') :]
        assert 'id="confirm"' not in after_live and 'id="edit"' not in after_live, path
    script = await client.get("/ui/static/live.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    assert 'htmx.trigger(live, "refresh")' in script.text
