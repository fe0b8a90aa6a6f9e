"""The Workflows view: a workflow drawn as a server-rendered SVG graph with each node's status,
its result or error, a wide fan-out summarized in one box per layer, a replay of the failed
nodes and a cancel — and nothing of another tenant's."""

from __future__ import annotations

import re
from typing import Any

import httpx
from ui_helpers import WORKER, Tenant, flash, page, post_form

from duetime.api.ui import graph_svg


async def _workflow(
    client: httpx.AsyncClient, tenant: Tenant, body: dict[str, Any]
) -> dict[str, Any]:
    resp = await client.post("/v1/workflows", json=body, headers=tenant.bearer)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def _run_first(client: httpx.AsyncClient, tenant: Tenant, *, fail: str | None) -> None:
    leased = await client.post(
        "/v1/queues/default/lease",
        json={"worker_id": "w", "wait_seconds": 0, "max_tasks": 1},
        headers=tenant.bearer,
    )
    (held,) = leased.json()["leases"]
    lease_id = held["lease_id"]
    if fail is None:
        body: dict[str, Any] = {"result": {"rows": 42}}
        await client.post(f"/v1/leases/{lease_id}/complete", json=body, headers=tenant.bearer)
    else:
        body = {"error": fail, "retryable": False}
        await client.post(f"/v1/leases/{lease_id}/fail", json=body, headers=tenant.bearer)


async def test_a_workflow_is_drawn_with_each_nodes_status_result_and_error(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    body = {
        "name": "etl",
        "defaults": {"target": WORKER},
        "nodes": [
            {"ref": "extract"},
            {"ref": "load", "depends_on": ["extract"]},
            {"ref": "report", "depends_on": ["load"], "on_parent_failure": "run"},
        ],
    }
    wf = await _workflow(client, acme, body)
    await _run_first(client, acme, fail=None)
    await _run_first(client, acme, fail="disk full")
    listed = await page(client, acme, "/ui/workflows")
    assert f"/ui/workflows/{wf['id']}" in listed and "etl" in listed
    assert 'href="/ui/workflows" class="on"' in listed
    html = await page(client, acme, f"/ui/workflows/{wf['id']}")
    assert html.count('<g class="node') == 3 and html.count('<line class="edge') == 2
    assert '<g class="node st-succeeded">' in html and '<g class="node st-failed">' in html
    assert "&#34;rows&#34;: 42" in html or "&quot;rows&quot;: 42" in html or '"rows": 42' in html
    assert "disk full" in html
    assert "Replay failed nodes" in html and "<script" not in html.split("</head>")[1]
    other = await page(client, globex, f"/ui/workflows/{wf['id']}", status=404)
    assert "no workflow" in other

    replayed = await post_form(client, acme, f"/ui/workflows/{wf['id']}/replay")
    assert replayed.status_code == 303 and "replayed the failed nodes" in flash(replayed)
    again = (await client.get(f"/v1/workflows/{wf['id']}", headers=acme.bearer)).json()
    assert {n["ref"]: n["status"] for n in again["nodes"]}["load"] == "ready"
    cancelled = await post_form(client, acme, f"/ui/workflows/{wf['id']}/cancel")
    assert cancelled.status_code == 303
    after = (await client.get(f"/v1/workflows/{wf['id']}", headers=acme.bearer)).json()
    assert after["status"] == "cancelled"


async def test_a_wide_fan_out_is_one_box_per_layer_beyond_the_first_ones(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    nodes = [{"ref": "root"}]
    nodes += [{"ref": f"leaf-{i}", "depends_on": ["root"]} for i in range(300)]
    nodes += [{"ref": "sink", "depends_on": [f"leaf-{i}" for i in range(300)]}]
    wf = await _workflow(client, acme, {"defaults": {"target": WORKER}, "nodes": nodes})
    html = await page(client, acme, f"/ui/workflows/{wf['id']}")
    drawn = html.count('<g class="node')
    assert drawn == 1 + graph_svg.MAX_PER_LAYER + 1 + 1
    assert f"+{300 - graph_svg.MAX_PER_LAYER} more" in html
    width = int(re.search(r'<svg viewBox="0 0 (\d+) (\d+)"', html).group(1))  # type: ignore[union-attr]
    assert width < 1000  # three layers wide, not three hundred boxes long
