"""The dashboard in a real headless Chromium (Debian's, driven by Playwright) against a real
``duetime serve`` on SQLite: log in with a tenant key, read the overview, pause a queue and edit
its limits (a refused value shown next to its field), search tasks by payload path and error
text, select tasks with the keyboard and confirm their cancel (a live refresh keeps the open
confirmation and the ticks), dismiss an "all matching" confirmation, pause the live refresh,
find the dead letters a failing receiver made and replay them, read a task's attempts, watch a
schedule's next runs cross a DST change, pause it with a note, see the workers and the failing
receiver's circuit on the Targets page; then log in with the admin token, pick the tenant on the
Tenants page and cancel a task as ``admin``. Every view is saved as a screenshot under
``$DUETIME_TEST_ARTIFACTS`` (default ``tests/ui/artifacts/``).

Chromium comes from Debian (``scripts/test`` installs it); this test never downloads a browser.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime.bench.harness import NodeOptions, Proc, running, start_node, start_receiver, wait_until

pytestmark = pytest.mark.acceptance

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN_TOKEN = "ui-browser-test-admin-token-of-32-chars"
FAILING = 6


def artifacts_dir() -> Path:
    found = Path(os.environ.get("DUETIME_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")
    found.mkdir(parents=True, exist_ok=True)
    return found


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():  # never skip silently: the browser test is part of the suite
        pytest.fail(
            "no /usr/bin/chromium: run ./scripts/test as root (it installs Debian's chromium) "
            "or `apt-get install chromium`",
            pytrace=False,
        )
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        found = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield found
        finally:
            found.close()


def follow(page: Any, target: Any) -> None:
    """Click a link or a form's button and wait for the page it leads to (a bare click returns
    before the navigation, and a count taken then would read the old page)."""
    with page.expect_navigation():
        target.click()


def _api(node: Proc, key: str) -> httpx.Client:
    return httpx.Client(base_url=node.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _seed(api: httpx.Client, ok_url: str, bad_url: str) -> dict[str, Any]:
    """Work for every view: deliveries that succeed, a noisy queue whose receiver answers 500
    (dead letters after two attempts), worker tasks, a far-future task and a DST schedule."""
    fast_fail = {"max_attempts": 2, "initial_delay_seconds": 0.2, "jitter": 0}
    tasks = [
        {"name": "send-receipt", "queue": "emails", "target": {"type": "http", "url": ok_url},
         "payload": {"n": n}, "labels": {"team": "billing"}}
        for n in range(12)
    ] + [
        {"name": "sync-crm", "queue": "crm", "target": {"type": "http", "url": bad_url},
         "payload": {"customer": n}, "retry": fast_fail}
        for n in range(FAILING)
    ] + [
        {"name": "build-report", "queue": "reports", "target": {"type": "worker"},
         "payload": {"month": m}}
        for m in range(3)
    ] + [
        {"name": "renew", "queue": "emails", "target": {"type": "http", "url": ok_url},
         "delay_seconds": 86400},
    ] + [
        {"name": "cleanup", "queue": "batch", "target": {"type": "worker"}, "payload": {"n": n},
         "delay_seconds": 3600}
        for n in range(3)
    ]  # fmt: skip
    made = api.post("/v1/tasks/batch", json={"tasks": tasks})
    assert made.status_code == 201, made.text
    assert api.put("/v1/queues/reports", json={"max_concurrency": 4}).status_code == 200
    schedule = api.post(
        "/v1/schedules",
        json={
            "cron": "30 2 * * *",
            "timezone": "America/New_York",
            "task": {
                "name": "nightly",
                "queue": "emails",
                "target": {"type": "http", "url": ok_url},
            },
        },
    )
    assert schedule.status_code == 201, schedule.text
    lease = {
        "max_tasks": 1,
        "lease_seconds": 300,
        "wait_seconds": 0,
        "worker_id": "report-worker-1",
    }
    leased = api.post("/v1/queues/reports/lease", json=lease)
    assert leased.status_code == 200 and len(leased.json()["leases"]) == 1, leased.text
    return {"schedule_id": schedule.json()["id"]}


def _settle(page: Any, expression: str, expected: object, seconds: float = 10.0) -> None:
    """Wait until ``expression`` (evaluated in the page) is ``expected``: the page's CSP refuses
    the string eval that Playwright's ``wait_for_function`` uses."""
    for _ in range(int(seconds / 0.05)):
        if page.evaluate(expression) == expected:
            return
        page.wait_for_timeout(50)
    assert page.evaluate(expression) == expected


def _rows(page: Any) -> int:
    return int(page.locator("#live tbody tr").count())


def _search(page: Any, url: str) -> None:
    """By payload path, by error text (with a status), and a search refused next to its field."""
    page.goto(f"{url}/ui/tasks")
    page.fill("input[name=payload]", "payload.customer = 3")
    follow(page, page.locator("button", has_text="Search"))
    assert _rows(page) == 1 and "sync-crm" in page.locator("#live tbody").inner_text()
    page.goto(f"{url}/ui/tasks?status=failed")
    page.fill("input[name=error]", "http 500")
    follow(page, page.locator("button", has_text="Search"))
    assert _rows(page) == FAILING
    page.fill("input[name=error]", "")
    page.fill("input[name=payload]", "customer = 3")
    follow(page, page.locator("button", has_text="Search"))
    field = page.locator("input[name=payload]")
    assert field.get_attribute("aria-invalid") == "true"
    assert "write payload." in page.locator("#err-payload").inner_text()


def _select_by_keyboard_and_confirm(page: Any, url: str, api: httpx.Client) -> None:
    """Tab to a task's box, Space ticks it, the bulk button asks, Enter confirms; a refresh
    while the confirmation is open keeps it and the ticks; "all matching" counts and can be
    dismissed."""
    page.goto(f"{url}/ui/tasks?queue=batch")
    ids = page.eval_on_selector_all("input[name=pick]", "boxes => boxes.map(b => b.value)")
    assert len(ids) == 3
    page.locator("#pick-all").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == f"pick-{ids[0]}"
    page.keyboard.press("Space")
    for _ in range(3):  # past the row's task link and its Cancel button
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == f"pick-{ids[1]}"
    page.keyboard.press("Space")
    assert page.locator("#picked-count").inner_text() == "2 selected"
    page.locator("button", has_text="Cancel selected").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#confirm h2")
    assert page.locator("#confirm h2").inner_text() == "Cancel 2 tasks?"
    # Focus moves to the confirming button once htmx has settled the swap.
    _settle(page, "document.activeElement && document.activeElement.textContent", "Cancel 2 tasks")
    # A refresh of the list now keeps the open confirmation and the ticks.
    page.evaluate("document.body.dataset.refreshSeconds = '0.2'")
    page.wait_for_timeout(800)
    assert page.locator("#confirm h2").inner_text() == "Cancel 2 tasks?"
    assert page.locator(f"#pick-{ids[0]}").is_checked()
    assert page.evaluate("document.activeElement.textContent") == "Cancel 2 tasks"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator(".flash[role=status]").inner_text() == "cancelled 2 task(s)"
    statuses = [api.get(f"/v1/tasks/{i}").json()["status"] for i in ids]
    assert sorted(statuses) == ["cancelled", "cancelled", "scheduled"]

    page.goto(f"{url}/ui/tasks?queue=batch&status=scheduled")
    page.locator("button", has_text="Cancel all matching").click()
    page.wait_for_selector("#confirm h2")
    assert page.locator("#confirm h2").inner_text() == "Cancel 1 task?"
    page.locator("#confirm a", has_text="Keep them").click()
    page.wait_for_selector("#confirm h2", state="detached")
    assert page.url.endswith("status=scheduled")  # closed in place, nothing done
    left = [i for i, s in zip(ids, statuses, strict=True) if s == "scheduled"]
    assert api.get(f"/v1/tasks/{left[0]}").json()["status"] == "scheduled"


def _pause_keeps_the_page_still(page: Any, url: str, api: httpx.Client) -> None:
    """Paused, the list stays as it is while tasks arrive; resumed, it catches up."""
    page.goto(f"{url}/ui/tasks?queue=arrivals")
    page.evaluate("document.body.dataset.refreshSeconds = '0.2'")
    toggle = page.locator("#live-toggle")
    assert toggle.is_visible() and toggle.get_attribute("aria-pressed") == "false"
    assert page.locator("#live-state").inner_text().startswith("Live")
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    assert page.locator("#live-state").inner_text().startswith("Paused")
    made = api.post("/v1/tasks", json={"queue": "arrivals", "target": {"type": "worker"}})
    assert made.status_code == 201
    page.wait_for_timeout(1000)  # five refresh periods
    assert _rows(page) == 0 and "No task matches" in page.locator("#live").inner_text()
    toggle.click()
    page.locator("#live tbody tr").first.wait_for()
    assert _rows(page) == 1
    # A refresh keeps the focus, and the tick, on the box it was on.
    box = page.locator("input[name=pick]").first
    for _ in range(5):  # a refresh may swap the box out between the focus and the key press
        box.focus()
        page.keyboard.press("Space")
        if page.locator("#picked-count").inner_text() == "1 selected":
            break
    assert page.locator("#picked-count").inner_text() == "1 selected"
    page.evaluate("window.__old = document.getElementById('live')")
    for _ in range(50):  # until the live part was swapped for a fresh one
        if page.evaluate("window.__old !== document.getElementById('live')"):
            break
        page.wait_for_timeout(50)
    assert page.evaluate("window.__old !== document.getElementById('live')")
    _settle(
        page, "document.activeElement && document.activeElement.id", f"pick-{made.json()['id']}"
    )
    assert box.is_checked() and page.locator("#picked-count").inner_text() == "1 selected"
    assert toggle.get_attribute("aria-pressed") == "false"


def _edit_a_queue_limit(page: Any, api: httpx.Client, shots: Path) -> None:
    """The queue's settings form: a refused value is shown next to its field, then saved."""
    page.locator("tr", has_text="reports").locator("a", has_text="Edit").click()
    page.wait_for_selector("#edit form")  # opened in place (htmx), focus on its first field
    _settle(page, "document.activeElement && document.activeElement.id", "f-max_concurrency")
    assert page.locator("#f-max_concurrency").input_value() == "4"
    page.fill("#f-max_concurrency", "0")
    follow(page, page.locator("#edit button", has_text="Save"))
    assert page.locator("#f-max_concurrency").get_attribute("aria-invalid") == "true"
    said = page.locator("#err-max_concurrency").inner_text()
    assert "greater than or equal to 1" in said
    page.screenshot(path=str(shots / "02b-queue-edit-refused.png"), full_page=True)
    assert api.get("/v1/queues/reports").json()["max_concurrency"] == 4  # unchanged
    page.fill("#f-max_concurrency", "6")
    follow(page, page.locator("#edit button", has_text="Save"))
    assert "queue reports: settings saved" in page.locator(".flash[role=status]").inner_text()
    saved = api.get("/v1/queues/reports").json()
    assert saved["max_concurrency"] == 6 and saved["paused"] is True  # the box was kept ticked


def _failed(api: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get("/v1/tasks", params={"status": "failed"}).json()["items"]
    return items


def test_dashboard_in_a_real_browser(tmp_path: Path, browser: Any) -> None:
    shots = artifacts_dir()
    ok = start_receiver(tmp_path)
    bad = start_receiver(tmp_path, fail_every=1)
    env = {
        "DUETIME_ADMIN_TOKEN": ADMIN_TOKEN,
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
        "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
        # The failing receiver trips its circuit (5 failures in a row) for the Targets page; a
        # short cool-down keeps its probes, one task each, within the waits below.
        "DUETIME_CIRCUIT_COOLDOWN_SECONDS": "0.3",
        "DUETIME_CIRCUIT_MAX_COOLDOWN_SECONDS": "1",
    }
    node = start_node(tmp_path, NodeOptions(db=f"sqlite:///{tmp_path / 'ui.db'}", env=env))
    with running(ok, bad, node):
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        tenant = httpx.post(f"{node.url}/v1/admin/tenants", json={"name": "acme"}, headers=admin)
        assert tenant.status_code == 201, tenant.text
        key = tenant.json()["api_key"]
        api = _api(node, key)
        seeded = _seed(api, f"{ok.url}/hook", f"{bad.url}/hook")
        wait_until(lambda: len(_failed(api)) == FAILING, 30, "the failing tasks to dead-letter")

        context = browser.new_context(viewport={"width": 1360, "height": 900})
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        # Not logged in: the login form, which takes the tenant's key once.
        page.goto(f"{node.url}/ui")
        assert "/ui/login" in page.url
        page.screenshot(path=str(shots / "00-login.png"))
        page.fill("input[name=api_key]", "dt_wrong-key")
        follow(page, page.locator("button[type=submit]"))
        assert "unknown or deleted API key" in page.content()
        page.fill("input[name=api_key]", key)
        follow(page, page.locator("button[type=submit]"))
        page.wait_for_url(f"{node.url}/ui")
        problems.clear()  # the wrong key's 401 above was expected
        cookie = next(c for c in context.cookies() if c["name"] == "duetime_ui_session")
        assert cookie["value"] != key
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"

        # Overview: counts by status and the charts of what just happened.
        assert page.locator(".count.st-failed .n").inner_text() == str(FAILING)
        assert page.locator("figure.chart").count() == 3
        assert page.locator("figure.chart rect.c-bad").count() >= 1, "failures not charted"
        assert page.locator("figure.chart rect.c-ok").count() >= 1, "successes not charted"
        assert "crm" in page.locator("section.card").first.inner_text(), "noisy queue not named"
        page.screenshot(path=str(shots / "01-overview.png"), full_page=True)
        # htmx (packaged, allowed by the page's CSP) swaps the live part in place: what the
        # 10-second refresh does, asked for now.
        assert page.evaluate("typeof window.htmx") == "object"
        total = int(page.locator(".count.total .n").inner_text().replace(",", ""))
        api.post("/v1/tasks", json={"queue": "emails", "target": {"type": "worker"}})
        page.evaluate("htmx.trigger('#live', 'refresh')")
        counted = "document.querySelector('.count.total .n').textContent.replaceAll(',', '')"
        _settle(page, counted, str(total + 1))

        # Queues: depth and limits; pause one.
        follow(page, page.locator("header nav >> text=Queues"))
        row = page.locator("tr", has_text="reports")
        assert "max concurrency 4" in row.inner_text()
        page.screenshot(path=str(shots / "02-queues.png"), full_page=True)
        follow(page, row.locator("button", has_text="Pause"))
        assert "queue reports paused" in page.locator(".flash[role=status]").inner_text()
        assert api.get("/v1/queues/reports").json()["paused"] is True
        _edit_a_queue_limit(page, api, shots)

        # Tasks, filtered as the API filters.
        page.goto(f"{node.url}/ui/tasks?status=failed&queue=crm")
        assert page.locator("tbody tr").count() == FAILING
        page.screenshot(path=str(shots / "03-tasks.png"), full_page=True)
        follow(page, page.locator("tbody tr a.mono").first)
        assert page.locator("ol.timeline li").count() == 2
        assert "HTTP 500" in page.locator("ol.timeline").inner_text()
        page.screenshot(path=str(shots / "04-task.png"), full_page=True)

        _search(page, node.url)
        _select_by_keyboard_and_confirm(page, node.url, api)
        _pause_keeps_the_page_still(page, node.url, api)
        # The refused searches and settings above answered 422 on purpose; nothing else may.
        problems[:] = [p for p in problems if "status of 422" not in p]

        # Dead letters: the failing receiver's group, replayed from the page.
        follow(page, page.locator("header nav >> text=Dead letters"))
        group = page.locator("article.group", has_text="500")
        assert group.locator(".n").inner_text() == str(FAILING)
        page.screenshot(path=str(shots / "05-dead-letters.png"), full_page=True)
        follow(page, group.locator("button", has_text="Replay"))
        assert f"replayed {FAILING} task(s)" in page.locator(".flash[role=status]").inner_text()
        replayed = [t["id"] for t in api.get("/v1/tasks", params={"queue": "crm"}).json()["items"]]

        def new_series_ran() -> bool:
            return all(
                len(api.get(f"/v1/tasks/{t}/attempts").json()["items"]) >= 3 for t in replayed
            )

        wait_until(new_series_ran, 30, "the replayed tasks to run again")

        # A schedule whose next runs cross the March DST change.
        follow(page, page.locator("header nav >> text=Schedules"))
        page.screenshot(path=str(shots / "06-schedules.png"), full_page=True)
        follow(page, page.locator("tbody tr a.mono").first)
        dst = page.locator("ul.dst-list li").first
        assert "dst" in dst.inner_text()
        follow(page, dst.locator("a", has_text="see"))
        moved = page.locator("table.upcoming tr.dst")
        assert moved.count() >= 1
        assert "03:00" in moved.first.inner_text() or "03:30" in moved.first.inner_text()
        page.screenshot(path=str(shots / "07-schedule-dst.png"), full_page=True)
        page.fill("input[name=note]", "vendor outage, back Monday")
        follow(page, page.locator("button", has_text="Pause"))
        assert "schedule paused: vendor outage" in page.locator(".flash[role=status]").inner_text()
        got = api.get(f"/v1/schedules/{seeded['schedule_id']}").json()
        assert got["paused"] is True and got["pause_note"] == "vendor outage, back Monday"
        follow(page, page.locator("button", has_text="Trigger now"))
        assert "triggered: task" in page.locator(".flash[role=status]").inner_text()
        assert "triggered" in page.locator("table.compact").nth(1).inner_text()
        page.screenshot(path=str(shots / "08-schedule-paused.png"), full_page=True)

        # Workers: the pull worker that leased a report, and the task it holds.
        follow(page, page.locator("header nav >> text=Workers"))
        assert "report-worker-1" in page.content()
        page.screenshot(path=str(shots / "09-workers.png"), full_page=True)

        # Targets: the failing receiver's origin, whose circuit opened (5 failures in a row).
        bad_origin = bad.url.rstrip("/")
        wait_until(
            lambda: any(i["origin"] == bad_origin for i in api.get("/v1/targets").json()["items"]),
            30,
            "the failing receiver's circuit to be recorded",
        )
        follow(page, page.locator("header nav >> text=Targets"))
        row = page.locator("table.targets tbody tr", has_text=bad_origin)
        assert row.locator(".badge").inner_text() in ("open", "half-open", "closed")
        assert int(row.locator("td.num").nth(1).inner_text()) >= 1  # times opened
        page.screenshot(path=str(shots / "10-targets.png"), full_page=True)

        follow(page, page.locator("button", has_text="Log out"))
        page.goto(f"{node.url}/ui/tasks")
        assert "/ui/login" in page.url

        # The admin token: the Tenants page first, then any tenant's views.
        other = httpx.post(f"{node.url}/v1/admin/tenants", json={"name": "globex"}, headers=admin)
        assert other.status_code == 201, other.text
        quotas = {"max_pending_tasks": 1000, "max_creates_per_second": 50, "max_schedules": 10}
        patched = httpx.patch(
            f"{node.url}/v1/admin/tenants/{other.json()['id']}", json=quotas, headers=admin
        )
        assert patched.status_code == 200, patched.text
        page.fill("input[name=api_key]", ADMIN_TOKEN)
        follow(page, page.locator("button[type=submit]"))
        assert "/ui/tenants?next=" in page.url
        assert page.locator("table.tenants tbody tr").count() == 2
        assert "admin" in page.locator("header .who").inner_text()
        page.screenshot(path=str(shots / "11-tenants.png"), full_page=True)
        follow(page, page.locator("tr", has_text="acme").locator("button", has_text="View"))
        assert "viewing tenant acme" in page.locator(".flash[role=status]").inner_text()
        assert "acme" in page.locator("header .who").inner_text()
        # Cancel the far-future task as the admin: the audit trail says so.
        page.goto(f"{node.url}/ui/tasks?name=renew")
        follow(page, page.locator("tbody tr a.mono").first)
        task_id = page.url.rsplit("/", 1)[1]
        follow(page, page.locator("button", has_text="Cancel"))
        assert "task cancelled" in page.locator(".flash[role=status]").inner_text()
        events = api.get("/v1/history", params={"task_id": task_id, "kind": "task"}).json()
        actors = [e["actor"] for e in events["items"] if e["to_status"] == "cancelled"]
        assert actors == ["admin"], events

        assert not problems, f"browser errors: {problems}"
        context.close()
        api.close()
