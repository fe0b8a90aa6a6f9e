"""The client side never imports the service: ``import duetime``, the SDK, the Worker and the CLI
load without FastAPI, asyncpg, uvicorn or aiohttp (what ``pip install duetime`` lacks)."""

from __future__ import annotations

import subprocess
import sys

SERVER_ONLY = ("fastapi", "starlette", "asyncpg", "uvicorn", "aiohttp", "jinja2", "cronsim")

PROBE = f"""
import sys
import duetime
from duetime import AsyncClient, Client, Worker
import duetime.sdk
import duetime.cli
import duetime.testing
from duetime.cli import app
from typer.testing import CliRunner
result = CliRunner().invoke(app, ["--help"])
assert result.exit_code == 0, result.output
for group in ("task", "schedule", "queue", "bench"):
    assert CliRunner().invoke(app, [group, "--help"]).exit_code == 0, group
print(sorted(m for m in {SERVER_ONLY!r} if m in sys.modules))
"""


def test_client_imports_no_server_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the client imported server modules: {done.stdout}"
