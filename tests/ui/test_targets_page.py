"""The Targets view: the tenant's circuit breakers as ``GET /v1/targets`` reports them, open
first, with a badge per state — and nothing of another tenant's."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from ui_helpers import Admin, Tenant, get_json, page

from duetime.api.ui import views_targets
from duetime.store import Store
from duetime.types import TargetCircuit


async def _circuit(
    store: Store,
    tenant: Tenant,
    origin: str,
    state: str,
    failures: int,
    cooldown: float,
    *,
    ago: float = 0.0,
) -> None:
    """Record a circuit's change, its cool-down started ``ago`` seconds before now."""
    now = await store.now()
    until = now + timedelta(seconds=cooldown - ago) if state != "closed" else None
    await store.circuit_put(
        TargetCircuit(tenant.id, origin, state, failures, cooldown, until, changed_at=now)
    )


async def test_targets_show_the_tenants_circuits(
    client: httpx.AsyncClient, store: Store, admin: Admin, acme: Tenant, globex: Tenant
) -> None:
    empty = await page(client, acme, "/ui/targets")
    assert "No circuit has opened for this tenant" in empty
    assert "Broker targets (AMQP, NATS, Redis) and pull workers have no circuit." in empty
    assert "<table" not in empty
    assert 'href="/ui/targets" class="on" aria-current="page"' in empty  # in the nav

    await _circuit(store, acme, "https://calm.acme.example:443", "closed", 0, 0.0)
    await _circuit(store, acme, "https://calm.acme.example:443", "open", 5, 5.0)
    await _circuit(store, acme, "https://calm.acme.example:443", "closed", 0, 0.0)
    await _circuit(store, acme, "http://flaky.acme.example:8080", "half_open", 5, 10.0)
    await _circuit(store, acme, "https://down.acme.example:443", "open", 7, 40.0)
    await _circuit(store, acme, "https://waiting.acme.example:443", "open", 5, 5.0, ago=6.0)
    await _circuit(store, globex, "https://globex-secret.example:443", "open", 5, 5.0)

    html = await page(client, acme, "/ui/targets")
    rows = re.findall(
        r'<tr class="circuit-(\w+)">\s*<td class="mono">([^<]+)</td>\s*'
        r'<td><span class="badge cs-\1">([^<]+)</span></td>\s*<td class="num">(\d+)</td>',
        html,
    )
    assert rows == [
        ("open", "https://down.acme.example:443", "open", "7"),
        ("open", "https://waiting.acme.example:443", "open", "5"),
        ("half_open", "http://flaky.acme.example:8080", "half-open", "5"),
        ("closed", "https://calm.acme.example:443", "closed", "0"),
    ]
    assert "globex-secret" not in html
    counts = re.findall(r'class="count cs-(\w+)"><span class="n">(\d+)</span>', html)
    assert counts == [("open", "2"), ("half_open", "1"), ("closed", "1")]
    down, waiting = re.findall(r'<tr class="circuit-open">.*?</tr>', html, re.S)
    assert "<td>40 s</td>" in down and "in 40 s" in down  # cool-down; open until
    assert "cool-down over" not in down
    assert "1 s ago" in waiting and "cool-down over: the next delivery probes" in waiting
    calm = re.search(r'<tr class="circuit-closed">.*?</tr>', html, re.S)
    assert calm is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", calm.group(0), re.S)
    assert cells[3] == "—" and cells[5] == "1"  # no cool-down when closed; opened once
    # What the API reports, the page shows.
    api = await get_json(client, acme, "/v1/targets")
    assert [i["origin"] for i in api["items"]] != [] and all(
        i["origin"] in html for i in api["items"]
    )

    # An admin viewing globex sees globex's circuits, not acme's.
    theirs = await page(client, admin.viewing(globex.id), "/ui/targets")
    assert "https://globex-secret.example:443" in theirs and "acme.example" not in theirs


async def test_targets_are_paged_in_their_order(
    client: httpx.AsyncClient, store: Store, acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views_targets, "PAGE_SIZE", 2)
    await _circuit(store, acme, "https://a.example:443", "closed", 0, 0.0)
    await _circuit(store, acme, "https://b.example:443", "open", 5, 5.0)
    await _circuit(store, acme, "https://c.example:443", "open", 5, 5.0)
    shown: list[str] = []
    path: str | None = "/ui/targets"
    while path is not None:
        html = await page(client, acme, path)
        shown += re.findall(r'<td class="mono">([^<]+)</td>', html)
        found = re.search(r'<a class="next" href="([^"]+)"', html)
        path = found.group(1).replace("&amp;", "&") if found else None
    assert shown == ["https://b.example:443", "https://c.example:443", "https://a.example:443"]
