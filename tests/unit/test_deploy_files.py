"""The deploy files, linted (no container engine here): the Dockerfile runs as a non-root user
with a health check; the compose file has PostgreSQL, two nodes and a worker, each with the
health checks and start order that make ``up`` work; the systemd unit passes
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
        assert env["DUETIME_DB"].startswith("postgresql://") and "@postgres:" in env["DUETIME_DB"]
        assert "DUETIME_ADMIN_TOKEN" in env, "0.0.0.0 needs an admin token (dev mode refuses)"
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
