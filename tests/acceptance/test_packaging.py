"""The package as a user installs it: the wheel and sdist build; the wheel installs into a clean
venv without the service's dependencies; and that lean install imports, runs ``duetime --help``
and drives a real node (started from the dev venv) through the SDK, a Worker and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime.bench.harness import NodeOptions, running, start_node

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = (
    "fastapi",
    "asyncpg",
    "uvicorn",
    "aiohttp",
    "starlette",
    "jinja2",
    "cronsim",
    "pydantic_settings",
)


def _run(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def lean_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clean venv with only the built wheel (and its four dependencies) installed."""
    work = tmp_path_factory.mktemp("packaging")
    dist = work / "dist"
    # As CI and a release would: an isolated build (the build backend from the package index).
    _run(sys.executable, "-m", "build", "--outdir", dist, ROOT, timeout=180)
    wheels = list(dist.glob("duetime-*.whl"))
    sdists = list(dist.glob("duetime-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(dist.iterdir())
    names = zipfile.ZipFile(wheels[0]).namelist()
    # The migrations and dashboard templates travel in the wheel (package data).
    assert any(n.endswith(".sql") and "/migrations/" in n for n in names)
    assert any(n.startswith("duetime/api/ui/templates/") for n in names)
    venv = work / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheels[0], timeout=180)
    yield venv


def test_lean_install_has_no_service_dependencies(lean_venv: Path) -> None:
    py = lean_venv / "bin" / "python"
    missing = _run(
        py,
        "-c",
        f"import importlib.util as u; print([m for m in {SERVER_ONLY!r} if u.find_spec(m)])",
    )
    assert missing.strip() == "[]", f"server packages in the lean install: {missing}"
    out = _run(py, "-c", "import duetime; from duetime import Client, Worker; print('ok')")
    assert out.strip() == "ok"
    help_text = _run(lean_venv / "bin" / "duetime", "--help")
    for command in ("task", "schedule", "queue", "worker", "serve"):
        assert command in help_text
    # A service command says which extra it needs, in one line, instead of a traceback.
    done = subprocess.run(
        [str(lean_venv / "bin" / "duetime"), "migrate"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "duetime[server]" in done.stderr and "Traceback" not in done.stderr


def test_quickstart_against_a_node_from_the_lean_install(lean_venv: Path, tmp_path: Path) -> None:
    node = start_node(tmp_path, NodeOptions(db=f"sqlite:///{tmp_path / 'q.db'}"), "quick")
    script = tmp_path / "quick.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, sys
            from duetime import Client, Worker

            with Client() as client:   # DUETIME_URL from the environment
                schedule = client.ensure_schedule(
                    key="nightly-report", cron="0 2 * * *", timezone="America/New_York",
                    task={"name": "send-report", "target": {"type": "worker"}},
                )
                again = client.ensure_schedule(
                    key="nightly-report", cron="0 2 * * *", timezone="America/New_York",
                    task={"name": "send-report", "target": {"type": "worker"}},
                )
                assert again.id == schedule.id, (again, schedule)
                task = client.create_task(name="send-report", target={"type": "worker"},
                                          payload={"n": 1})

            worker = Worker(queues=["default"], concurrency=2)

            @worker.handler("send-report")
            async def send_report(job):
                return {"sent": job.payload}

            asyncio.run(asyncio.wait_for(worker.run(until_empty=True), 30))
            with Client() as client:
                print(client.get_task(task.id).status)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_URL"] = node.url
    with running(node):
        out = _run(lean_venv / "bin" / "python", script, env=env, timeout=60)
        assert out.split()[-1] == "succeeded", out
        listed = _run(lean_venv / "bin" / "duetime", "task", "list", "-o", "json", env=env)
        assert "send-report" in listed
