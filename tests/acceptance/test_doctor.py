"""``duetime doctor`` against a real node (dev mode, SQLite) and its store; and an unreachable
one."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.bench.harness import NodeOptions, free_port, running, start_node

pytestmark = pytest.mark.acceptance


def test_doctor_checks_a_running_node_and_its_store(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    node = start_node(tmp_path, NodeOptions(db=db), "doc")
    runner = CliRunner()
    with running(node):
        made = httpx.post(
            f"{node.url}/v1/tasks",
            json={"target": {"type": "worker"}, "queue": "jobs", "name": "x"},
        )
        assert made.status_code == 201
        result = runner.invoke(
            cli.app, ["doctor", "--url", node.url, "--db", db, "-o", "json"], env={}
        )
        assert result.exit_code == 0, result.output
        found = {c["check"]: c for c in json.loads(result.stdout)["items"]}
        assert found["node"]["status"] == "ok"
        assert found["store"]["status"] == "ok"
        assert found["clock"]["status"] in ("ok", "warn")
        assert found["leader"]["status"] == "ok"  # dev mode: /metrics needs no token
        assert "queue jobs" in found and "waiting" in found["queue jobs"]["detail"]
        assert found["migrations"] == {"check": "migrations", "status": "ok", "detail": "current"}
        assert found["history"]["status"] == "ok"  # SQLite writes history directly
        assert found["store clock"]["status"] in ("ok", "warn")
        table = runner.invoke(cli.app, ["doctor", "--url", node.url], env={})
        assert table.stdout.splitlines()[0].split() == ["CHECK", "STATUS", "DETAIL"]


def test_doctor_says_an_unreachable_node_and_exits_5() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli.app, ["doctor", "--url", url, "-o", "json"], env={})
    assert result.exit_code == 5
    [check] = json.loads(result.stdout)["items"]
    assert check["status"] == "fail" and "cannot reach" in check["detail"]
