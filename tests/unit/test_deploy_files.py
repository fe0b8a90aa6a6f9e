"""The deploy files, linted (no container engine here): the Dockerfile runs as a non-root user
with a health check; the compose file has PostgreSQL, two nodes, a worker, Prometheus and
Grafana, each with the health checks and start order that make ``up`` work, and its secrets
only as files (``*_FILE``) that deploy/make-secrets writes; the systemd unit passes
``systemd-analyze verify``. When docker is on PATH, the image is also built."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from duetime.config import FILE_SUFFIX, SECRET_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_slim_non_root_and_health_checked() -> None:
    steps = _instructions()
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms and all("slim" in f for f in froms), froms
    final = steps[max(i for i, (w, _) in enumerate(steps) if w == "FROM") :]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0"), users
    health = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert health and "/readyz" in health[0] and "--interval" in health[0]
    installs = " ".join(rest for word, rest in steps if word == "RUN")
    assert "duetime[server]" in installs or ".[server]" in installs
    entry = [rest for word, rest in final if word in ("ENTRYPOINT", "CMD")]
    assert entry == ['["duetime"]', '["serve"]']


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_has_postgres_two_nodes_and_a_worker_in_order() -> None:
    services = _compose()["services"]
    assert {"postgres", "node-a", "node-b", "worker"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    for name in ("node-a", "node-b"):
        node = services[name]
        env = node["environment"]
        assert env["DUETIME_DB_FILE"] == "/run/secrets/db_url"
        assert "DUETIME_ADMIN_TOKEN_FILE" in env, "0.0.0.0 needs an admin token (dev mode refuses)"
        assert node["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "/readyz" in " ".join(node["healthcheck"]["test"])
        assert node["build"]["dockerfile"] == "Dockerfile"
    assert (
        services["node-a"]["environment"]["DUETIME_NODE_ID"]
        != (services["node-b"]["environment"]["DUETIME_NODE_ID"])
    )
    worker = services["worker"]
    assert worker["command"][0] == "worker"
    assert worker["environment"]["DUETIME_URL"].startswith("http://node-")
    assert worker["depends_on"]["node-a"]["condition"] == "service_healthy"
    mounted = worker["volumes"][0].split(":")[0]
    module = worker["command"][1].split(":")[0]
    assert (ROOT / "deploy" / mounted / f"{module}.py").is_file()


def test_compose_has_no_inline_secret_and_every_secret_file_is_made(tmp_path: Path) -> None:
    text = (ROOT / "deploy" / "compose.yaml").read_text()
    assert "POSTGRES_PASSWORD:" not in text and not re.search(r"postgresql://\w+:\w+@", text)
    compose = _compose()
    declared = compose["secrets"]
    for name, secret in declared.items():
        assert secret["file"] == f"./secrets/{name}", (name, secret)
    ignored = (ROOT / "deploy" / "secrets" / ".gitignore").read_text().split()
    assert "*" in ignored, "deploy/secrets/ must keep the secret files out of git"
    secret_settings = {f"DUETIME_{n.upper()}{FILE_SUFFIX}" for n in SECRET_SETTINGS}
    for service_name, service in compose["services"].items():
        env = service.get("environment", {})
        for variable, value in env.items():
            if variable.endswith("_FILE") or variable.endswith("__FILE"):
                mounted = value.removeprefix("/run/secrets/")
                assert mounted in service["secrets"], (service_name, variable)
                assert mounted in declared, (service_name, variable)
                if variable.startswith("DUETIME_"):
                    assert variable in secret_settings, (service_name, variable)
            assert (
                variable.startswith("DUETIME_")
                or "PASSWORD" not in variable
                or (variable.endswith("_FILE"))
            ), (service_name, variable)
    # deploy/make-secrets writes every declared file; the URL carries the database's password.
    done = subprocess.run(
        [str(ROOT / "deploy" / "make-secrets"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in tmp_path.iterdir()} == set(declared)
    password = (tmp_path / "db_password").read_text().strip()
    assert f"duetime:{password}@postgres:5432/" in (tmp_path / "db_url").read_text()
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    subprocess.run([str(ROOT / "deploy" / "make-secrets"), str(tmp_path)], check=True, timeout=60)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before, "secrets were replaced"


def test_compose_prometheus_and_grafana_watch_the_nodes() -> None:
    services = _compose()["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    mounts = {
        m.split(":")[1]: ROOT / "deploy" / m.split(":")[0]
        for m in prometheus["volumes"] + grafana["volumes"]
        if m.startswith("./")
    }
    for source in mounts.values():
        assert source.exists(), source
    config_path = mounts["/etc/prometheus/prometheus.yml"]
    assert mounts["/etc/prometheus/alerts.yml"] == ROOT / "deploy/prometheus/alerts.yml"
    config = yaml.safe_load(config_path.read_text())
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = config["scrape_configs"]
    targets = job["static_configs"][0]["targets"]
    assert sorted(targets) == ["node-a:8080", "node-b:8080"]
    token = job["authorization"]["credentials_file"]
    assert token == "/run/secrets/metrics_token" and "metrics_token" in prometheus["secrets"]
    for node in ("node-a", "node-b"):
        env = services[node]["environment"]
        assert env["DUETIME_METRICS_TOKEN_FILE"] == token
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards/duetime.yml").read_text())["providers"]
    folder = provider["options"]["path"]
    assert mounts[f"{folder}/duetime.json"] == ROOT / "deploy/grafana/duetime.json"
    assert grafana["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_compose_worker_example_imports_with_the_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import app; print(sorted(app.worker.handler_names))"],
        cwd=ROOT / "deploy" / "worker",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "send-report" in done.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    unit = (ROOT / "deploy" / "systemd" / "duetime.service").read_text()
    assert "ExecStart=/opt/duetime/bin/duetime serve" in unit
    assert re.search(r"^User=duetime$", unit, re.M) and "EnvironmentFile=" in unit
    # verify checks that ExecStart exists: point it at this venv's duetime.
    local = tmp_path / "duetime.service"
    local.write_text(
        unit.replace("/opt/duetime/bin/duetime", str(Path(sys.executable).parent / "duetime"))
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "duetime.service" not in done.stderr, done.stderr


def _engine_running() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _engine_running(), reason="no running container engine here")
def test_image_builds() -> None:  # pragma: no cover - runs only where docker is installed
    done = subprocess.run(
        ["docker", "build", "-t", "duetime:test", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
