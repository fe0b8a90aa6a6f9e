"""The store goes away under a running node: the API answers 503 with Retry-After (never a stack
trace), accepted tasks stay accepted, and the engine resumes by itself when the store returns."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from duetime.bench.harness import (
    NodeOptions,
    receiver_records,
    running,
    start_node,
    start_receiver,
    wait_until,
)
from duetime.testing.tcpproxy import TcpProxy

pytestmark = pytest.mark.acceptance


def _through(proxy: TcpProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_api_503_during_outage_and_engine_recovers(pg_url: str, tmp_path: Path) -> None:
    parts = urlsplit(pg_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    env = {"DUETIME_POLL_INTERVAL_SECONDS": "0.2", "DUETIME_LEADER_TTL_SECONDS": "3"}
    receiver = start_receiver(tmp_path)
    node = start_node(tmp_path, NodeOptions(db=_through(proxy, pg_url), env=env), "n")
    try:
        with running(receiver, node):
            hook = {"type": "http", "url": f"{receiver.url}/hook"}
            due = (datetime.now(UTC) + timedelta(seconds=4)).isoformat()
            made = httpx.post(f"{node.url}/v1/tasks", json={"target": hook, "run_at": due})
            assert made.status_code == 201, made.text
            accepted = made.json()["id"]

            proxy.cut()
            during = httpx.post(f"{node.url}/v1/tasks", json={"target": hook}, timeout=30)
            assert during.status_code == 503, during.text
            assert during.headers["content-type"].startswith("application/problem+json")
            assert "retry-after" in during.headers
            assert "Traceback" not in during.text
            assert httpx.get(f"{node.url}/readyz", timeout=30).status_code == 503
            assert httpx.get(f"{node.url}/healthz").status_code == 200
            time.sleep(5)  # the task falls due while the store is away

            proxy.restore()
            wait_until(lambda: httpx.get(f"{node.url}/readyz").status_code == 200, 30, "readyz")
            after = httpx.post(f"{node.url}/v1/tasks", json={"target": hook})
            assert after.status_code == 201, after.text
            fresh = after.json()["id"]

            def delivered() -> bool:
                got = {r["task_id"] for r in receiver_records(receiver.url)}
                return {accepted, fresh} <= got

            wait_until(
                delivered, 30, "both tasks delivered after the outage\n" + node.log()[-2000:]
            )
            for task_id in (accepted, fresh):
                wait_until(
                    lambda t=task_id: (
                        httpx.get(f"{node.url}/v1/tasks/{t}").json()["status"] == "succeeded"
                    ),
                    15,
                    f"task {task_id} succeeded",
                )
    finally:
        proxy.close()
