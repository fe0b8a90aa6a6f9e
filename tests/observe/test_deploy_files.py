"""The shipped alert rules (deploy/prometheus/alerts.yml) and Grafana dashboard
(deploy/grafana/duetime.json) load, and every metric they name is exported by a real node's
``/metrics``. With promtool on PATH (Debian: ``apt-get install prometheus``) the rules are also
checked by Prometheus's own parser (scripts/test extracts it into .venv/bin)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.observe.promql import PROMETHEUS_MADE, exported_names, metric_names

from duetime.bench.harness import NodeOptions, running, start_node

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
DASHBOARD = ROOT / "deploy/grafana/duetime.json"


def _alert_exprs() -> dict[str, str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {rule["alert"]: rule["expr"] for group in doc["groups"] for rule in group["rules"]}


def _panel_exprs() -> dict[str, str]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    found = {}
    for panel in doc["panels"]:
        for target in panel["targets"]:
            found[f"{panel['title']} / {target['refId']}"] = target["expr"]
    for variable in doc["templating"]["list"]:
        query = variable.get("definition", "")
        if query.startswith("label_values("):
            found[f"variable {variable['name']}"] = query.split("(", 1)[1].split(",")[0]
    return found


def test_name_extraction() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (queue, le) (rate(duetime_due_lag_seconds_bucket"
        '{queue=~"$queue"}[5m]))) > 1 and on (queue) up{job="x"} offset 5m'
    )
    assert metric_names(expr) == {"duetime_due_lag_seconds_bucket", "up"}


def test_rules_pass_promtool() -> None:
    beside = Path(sys.executable).parent / "promtool"  # where scripts/test puts it
    promtool = shutil.which("promtool") or (str(beside) if beside.exists() else None)
    if promtool is None:
        pytest.skip(
            "promtool is not installed (apt-get install prometheus); names are still checked"
        )
    done = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    """deploy/prometheus/prometheus.yml, checked whole (its rule file too) by promtool, with the
    token file it names (mounted in the container) pointed at a stand-in."""
    beside = Path(sys.executable).parent / "promtool"
    promtool = shutil.which("promtool") or (str(beside) if beside.exists() else None)
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    config = (ROOT / "deploy/prometheus/prometheus.yml").read_text()
    assert "/run/secrets/metrics_token" in config
    (tmp_path / "token").write_text("stand-in\n")
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/run/secrets/metrics_token", str(tmp_path / "token"))
    )
    (tmp_path / "alerts.yml").write_text(ALERTS.read_text())
    done = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout + done.stderr


def test_every_expression_names_exported_metrics(tmp_path: Path) -> None:
    exprs = {**_alert_exprs(), **_panel_exprs()}
    assert len(_alert_exprs()) >= 4 and len(_panel_exprs()) >= 15
    with running(start_node(tmp_path, NodeOptions(db=f"sqlite:///{tmp_path / 'n.db'}"))) as (node,):
        scraped = httpx.get(node.url + "/metrics", timeout=10)
        assert scraped.status_code == 200
    exported = exported_names(scraped.text) | PROMETHEUS_MADE
    missing = {
        where: sorted(names - exported)
        for where, expr in exprs.items()
        if (names := metric_names(expr)) - exported
    }
    assert not missing, f"expressions name metrics the node does not export: {missing}"
    unused = {n for n in exported if n.startswith("duetime_")}
    assert {"duetime_due_lag_seconds_bucket", "duetime_dead_letters_total"} <= unused
