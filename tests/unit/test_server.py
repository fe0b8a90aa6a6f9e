"""Settings checks and the start-up of ``duetime serve``: the refusals come as one line before
the store is touched (real ``duetime serve`` subprocesses on loopback)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from duetime.bench.harness import NodeOptions, free_port, start_node
from duetime.config import Settings
from duetime.errors import ConfigError, ValidationError
from duetime.node.wiring import build_target_validator

TOKEN = "a" * 32


def test_target_validator_checks_every_served_type() -> None:
    validate = build_target_validator(Settings(admin_token="t"))
    validate({"type": "worker"})
    validate({"type": "amqp", "url": "amqp://mq.example", "exchange": "x"})
    with pytest.raises(ValidationError) as err:
        validate({"type": "amqp", "url": "amqp://127.0.0.1", "exchange": "x"})
    assert err.value.field == "target.url"  # the private-address guard, as for webhooks
    with pytest.raises(ValidationError) as err:
        validate({"type": "carrier-pigeon"})
    assert err.value.field == "target.type"


def test_target_validator_applies_the_private_address_guard() -> None:
    strict = build_target_validator(Settings(admin_token="t"))
    with pytest.raises(ValidationError) as err:
        strict({"type": "http", "url": "http://10.1.2.3/hook"})
    assert err.value.field == "target.url"
    dev = build_target_validator(Settings())  # dev mode allows private targets
    dev({"type": "http", "url": "http://127.0.0.1:9/hook"})


def test_dev_mode_is_refused_on_a_public_bind() -> None:
    with pytest.raises(ConfigError):
        Settings(host="0.0.0.0").check()
    Settings(host="0.0.0.0", admin_token=TOKEN).check()


def test_dispatch_processes_default_to_one_per_core_on_postgresql_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    pg = "postgresql://postgres@127.0.0.1/test"
    assert Settings(db=pg).dispatch_process_count == 2
    assert Settings(db="sqlite:///x.db").dispatch_process_count == 1
    assert Settings().dispatch_process_count == 1  # the embedded default is SQLite
    monkeypatch.setattr("os.cpu_count", lambda: 32)
    assert Settings(db=pg).dispatch_process_count == 4
    assert Settings(db=pg, dispatch_processes=6).dispatch_process_count == 6


def test_dispatch_processes_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs PostgreSQL"):
        Settings(db="sqlite:///x.db", dispatch_processes=2).check()
    with pytest.raises(ConfigError, match="dispatch_processes must be"):
        Settings(dispatch_processes=-1).check()
    pg = "postgresql://postgres@127.0.0.1/test"
    with pytest.raises(ConfigError, match="at least dispatch_processes"):
        Settings(db=pg, dispatch_processes=4, dispatch_concurrency=3).check()


def test_the_node_concurrency_is_shared_by_its_processes() -> None:
    from duetime.node.processes import for_process

    settings = Settings(
        db="postgresql://postgres@127.0.0.1/test", dispatch_processes=3, dispatch_concurrency=512
    )
    parts = [for_process(settings, i).dispatch_concurrency for i in range(3)]
    assert sum(parts) == 512 and max(parts) - min(parts) <= 1
    per_origin = [for_process(settings, i).max_connections_per_origin for i in range(3)]
    assert per_origin == [22, 21, 21], "the node's 64 connections to one origin, shared"


async def test_the_webhook_pool_gets_the_per_origin_cap() -> None:
    from duetime.delivery.registry import build_deliverers
    from duetime.types import TargetType

    settings = Settings(max_connections_per_origin=7, dispatch_concurrency=100)
    webhook = build_deliverers(settings)[TargetType.HTTP]
    pool = webhook._get_pool()  # type: ignore[attr-defined]
    assert (pool.max_per_origin, pool.max_connections) == (7, 100)
    await webhook.close()


def test_a_short_admin_token_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 32"):
        Settings(admin_token="s3cret").check()
    Settings(admin_token=TOKEN).check()
    Settings(admin_token="").check()  # dev mode


def test_a_short_metrics_token_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"DUETIME_METRICS_TOKEN is 6 characters long.*at least 16"
    ):
        Settings(admin_token=TOKEN, metrics_token="s3cret").check()
    Settings(admin_token=TOKEN, metrics_token="m" * 16).check()
    Settings(admin_token=TOKEN).check()  # none: only the admin token reads /metrics


def _serve(tmp_path: Path, port: int, **env: str) -> subprocess.CompletedProcess[str]:
    """``duetime serve`` expected to refuse to start: its exit and output."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    clean.update({"DUETIME_HOST": "127.0.0.1", "DUETIME_PORT": str(port), **env})
    return subprocess.run(
        [sys.executable, "-m", "duetime", "serve"],
        env=clean,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_a_port_in_use_is_one_line_before_the_store_is_touched(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = tmp_path / "data"
        result = _serve(tmp_path, port, DUETIME_DATA_DIR=str(data))
    assert _one_error_line(result) == f"error: port {port} on 127.0.0.1 is in use"
    assert not (data / "duetime.db").exists()  # refused before migrating


def test_the_admin_token_is_refused_in_one_line(tmp_path: Path) -> None:
    result = _serve(tmp_path, free_port(), DUETIME_ADMIN_TOKEN="short")
    assert "at least 32" in _one_error_line(result)


def test_a_short_metrics_token_stops_the_start_in_one_line(tmp_path: Path) -> None:
    result = _serve(tmp_path, free_port(), DUETIME_ADMIN_TOKEN=TOKEN, DUETIME_METRICS_TOKEN="abc")
    assert "DUETIME_METRICS_TOKEN is 3 characters long" in _one_error_line(result)


@pytest.mark.acceptance  # two real nodes, ~7 s: not for the unit layer; CI runs it
def test_sqlite_files_are_private_and_one_node_holds_them(tmp_path: Path) -> None:
    node = start_node(tmp_path, NodeOptions(db=""), name="first")
    node_data = tmp_path / "data"  # start_node's DUETIME_DATA_DIR
    try:
        db = node_data / "duetime.db"
        assert stat.S_IMODE(node_data.stat().st_mode) == 0o700
        for path in (db, db.with_name("duetime.db-wal"), db.with_name("duetime.db-shm")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        second = _serve(tmp_path, free_port(), DUETIME_DATA_DIR=str(node_data))
        line = _one_error_line(second)
        assert "in use by another duetime serve" in line
        assert f"pid {node.popen.pid}" in line
    finally:
        node.kill()  # a crash leaves no stale lock: the kernel drops it with the process
    again = start_node(tmp_path, NodeOptions(db=""), name="again")
    assert again.stop() == 0


OPEN_FILES_PROBE = """
import logging, resource, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
soft, hard = (int(v) for v in sys.argv[1:3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
from duetime.node.server import check_open_files
check_open_files(1000)
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


@pytest.mark.parametrize(
    ("soft", "hard", "after", "warned"),
    [
        (300, 4000, 1256, False),  # raised to the connections and the node's other files
        (300, 900, 900, True),  # raised as far as the hard limit goes, and said so
        (2000, 4000, 2000, False),  # room enough: left as it is
    ],
)
def test_the_node_raises_its_open_file_limit_to_fit_its_connections(
    soft: int, hard: int, after: int, warned: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", OPEN_FILES_PROBE, str(soft), str(hard)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(done.stdout.strip()) == after
    assert ("DUETIME_MAX_CONNECTIONS" in done.stderr) is warned, done.stderr
