"""The package as a user installs it: the client (``duetime``) and the service
(``duetime-server``, packaging/server) build as wheels from the one src tree and split it
exactly, the client wheel holding only the package root, the SDK, the CLI and the modules they
import; the client wheel installs into a clean venv without the service's dependencies; and that
lean install imports, runs ``duetime --version`` and ``--help`` and drives a real node (started
from the dev venv) through the SDK, a Worker and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import grimp
import pytest

from duetime.bench.harness import NodeOptions, running, start_node
from duetime.version import __version__

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


SERVICE_PACKAGES = ("api", "engine", "store", "node", "delivery", "notify", "history", "schedule")


def _shipped(wheel: Path) -> set[str]:
    """The files a wheel puts into the ``duetime`` package."""
    return {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("duetime/")}


def _client_closure() -> set[str]:
    """The files of every module the package root, the SDK and the CLI import, transitively
    (with the ``__init__`` of each package on the way: importing a module runs them)."""
    graph = grimp.build_graph("duetime")
    roots = ["duetime", "duetime.__main__"] + [
        m for m in graph.modules if m.startswith(("duetime.sdk", "duetime.cli"))
    ]
    seen: set[str] = set()
    while roots:
        module = roots.pop()
        if module not in seen:
            seen.add(module)
            roots.extend(graph.find_modules_directly_imported_by(module))
    files = set()
    for module in seen | {m.rsplit(".", 1)[0] for m in seen if "." in m}:
        path = module.replace(".", "/")
        package = ROOT / "src" / path / "__init__.py"
        files.add(f"{path}/__init__.py" if package.exists() else f"{path}.py")
    return files


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The client wheel (with its sdist) and the service's wheel, built as a release would."""
    dist = tmp_path_factory.mktemp("dist")
    # As CI and a release would: an isolated build (the build backend from the package index).
    _run(sys.executable, "-m", "build", "--outdir", dist, ROOT, timeout=180)
    _run(sys.executable, "-m", "build", "--outdir", dist, ROOT / "packaging/server", timeout=180)
    client = list(dist.glob("duetime-*.whl"))
    server = list(dist.glob("duetime_server-*.whl"))
    sdists = list(dist.glob("duetime-*.tar.gz"))
    assert len(client) == len(server) == len(sdists) == 1, list(dist.iterdir())
    return client[0], server[0]


def test_client_wheel_ships_only_the_client(wheels: tuple[Path, Path]) -> None:
    client = _shipped(wheels[0])
    assert not [n for n in client if n.split("/")[1] in SERVICE_PACKAGES]
    assert client == _client_closure() | {"duetime/py.typed"}


def test_the_two_wheels_split_the_source_tree_exactly(wheels: tuple[Path, Path]) -> None:
    client, server = _shipped(wheels[0]), _shipped(wheels[1])
    assert not client & server, sorted(client & server)
    source = {
        str(p.relative_to(ROOT / "src"))
        for p in (ROOT / "src" / "duetime").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert client | server == source, sorted(source ^ (client | server))
    # The migrations and the dashboard's files travel in the service's wheel (package data).
    assert any(n.endswith(".sql") and "/migrations/" in n for n in server)
    assert any(n.startswith("duetime/api/ui/templates/") for n in server)


@pytest.fixture(scope="module")
def lean_venv(tmp_path_factory: pytest.TempPathFactory, wheels: tuple[Path, Path]) -> Path:
    """A clean venv with only the client wheel (and its four dependencies) installed."""
    venv = tmp_path_factory.mktemp("packaging") / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheels[0], timeout=180)
    return venv


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
    version = _run(lean_venv / "bin" / "duetime", "--version")
    assert version.split() == ["duetime", __version__], version
    listed = _run(py, "-m", "pip", "list", "--format", "freeze")
    assert "duetime-server" not in listed and "duetime_server" not in listed, listed
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
