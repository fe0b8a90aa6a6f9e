"""SPEC §9 metrics on a real node: failure classes, retries and dead letters, per-tenant
figures behind the cap, store round trips, HTTP figures by route template, process figures;
and the JSON log lines of failed attempts and dead letters."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from tests.observe.receivers import receiver

from duetime import metrics
from duetime.bench.harness import NodeOptions, free_port, running, start_node, wait_until

FAST = {"max_attempts": 2, "initial_delay_seconds": 0.05, "jitter": 0}
NODE_ENV = {
    "DUETIME_POLL_INTERVAL_SECONDS": "0.05",
    "DUETIME_LOG_FORMAT": "json",
    "DUETIME_LOG_LEVEL": "info",
}


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples of ``name`` by their sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    return sum(
        v for key, v in samples(text, name).items() if all((k, labels[k]) in key for k in labels)
    )


def test_node_exports_harm_figures(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}/nobody"
    with (
        receiver() as (base, _got),
        running(
            start_node(tmp_path, NodeOptions(db=f"sqlite:///{tmp_path / 'n.db'}", env=NODE_ENV))
        ) as (node,),
    ):
        api = httpx.Client(base_url=node.url, timeout=10)
        made = {}
        for path in ("/ok", "/fail", "/gone"):
            made[path] = api.post(
                "/v1/tasks",
                json={
                    "queue": "obs",
                    "target": {"type": "http", "url": base + path},
                    "retry": FAST,
                },
            ).json()["id"]
        made["closed"] = api.post(
            "/v1/tasks",
            json={"queue": "obs", "target": {"type": "http", "url": closed}, "retry": FAST},
        ).json()["id"]
        for task_id in made.values():
            assert api.get(f"/v1/tasks/{task_id}").status_code == 200

        def finished() -> bool:
            states = {api.get(f"/v1/tasks/{t}").json()["status"] for t in made.values()}
            return states <= {"succeeded", "failed"}

        wait_until(finished, 30, "every task to finish")

        def counted() -> bool:  # the figures are counted just after the rows are written
            text = api.get("/metrics").text
            return value(text, "duetime_tenant_attempts_total", tenant="default") == 6

        wait_until(counted, 10, "every attempt to be counted")
        text = api.get("/metrics").text
        log_text = node.log()

    failures = lambda kind: value(text, "duetime_attempt_failures_total", failure_class=kind)  # noqa: E731
    assert failures("5xx") == 2  # two attempts of /fail
    assert failures("4xx") == 1  # 410 is not retryable
    assert failures("connect") == 2
    assert value(text, "duetime_retries_total", queue="obs") == 2  # /fail and closed, once each
    assert value(text, "duetime_dead_letters_total", queue="obs") == 3
    assert value(text, "duetime_tenant_attempts_total", tenant="default", outcome="succeeded") == 1
    assert value(text, "duetime_tenant_attempts_total", tenant="default", outcome="failed") == 5
    # HTTP figures by route template, never by raw path.
    routes = {dict(k)["route"] for k in samples(text, "duetime_http_requests_total")}
    assert "/v1/tasks/{task_id}" in routes and "/v1/tasks" in routes
    assert not any(made["/ok"] in r for r in routes)
    assert value(text, "duetime_http_requests_total", route="/v1/tasks", status="201") == 4
    assert value(text, "duetime_http_request_duration_seconds_count", route="/v1/tasks") == 4
    # Store round trips, by operation; process figures.
    assert value(text, "duetime_store_seconds_count", operation="task_claim") > 0
    assert value(text, "duetime_store_seconds_count", operation="task_create_many") == 4
    assert value(text, "process_resident_memory_bytes") > 0
    assert value(text, "duetime_build_info") == 1

    # One JSON line per failed attempt and per dead letter, carrying task id, tenant, attempt.
    records = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    failed = [r for r in records if r.get("event") == "attempt_failed"]
    dead = [r for r in records if r.get("event") == "task_dead_lettered"]
    assert len(failed) == 5 and len(dead) == 3
    assert {r["task_id"] for r in dead} == {made["/fail"], made["/gone"], made["closed"]}
    assert all(r["tenant"] == "default" and r["attempt"] >= 1 for r in failed + dead)
    start = [r for r in records if r.get("event") == "settings"]
    assert len(start) == 1 and start[0]["settings"]["dispatch_concurrency"] == 512


def test_tenant_series_are_capped() -> None:
    before = set(metrics._tenants)
    try:
        labels = [metrics.tenant_label(f"t-{i}") for i in range(metrics.MAX_TENANT_SERIES + 50)]
        assert labels.count(metrics.OTHER) >= 50
        assert len(set(labels)) <= metrics.MAX_TENANT_SERIES + 1
        # Updates through child() (also those forwarded by dispatcher processes) are capped.
        metrics.child(metrics.TENANT_ATTEMPTS, "one-too-many", "failed").inc()
        assert "one-too-many" not in {
            s.labels["tenant"] for m in metrics.TENANT_ATTEMPTS.collect() for s in m.samples
        }
    finally:
        metrics._tenants.clear()
        metrics._tenants.update(before)
