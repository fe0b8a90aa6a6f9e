"""``duetime worker APP:OBJECT``: finding the worker object, applying flags, running it."""

from __future__ import annotations

import gc
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from duetime import cli
from duetime.cli.worker import load_worker
from duetime.sdk.worker import Worker

SDK_TESTS = Path(__file__).resolve().parents[1] / "sdk"
"""Where ``worker_fakes`` (the SDK tests' fake lease API) lives: the app below imports it."""

APP = """
import httpx
import worker_fakes
from duetime import AsyncClient, Worker, WorkerConfig

api = worker_fakes.FakeLeaseApi()
for n in range(5):
    api.add("double", payload=n)

worker = Worker(api.client(), concurrency=2, config=WorkerConfig(ack_flush_seconds=0.001))

@worker.handler("double")
def double(job):
    return job.payload * 2

def make():
    w = Worker("http://127.0.0.1:1")
    w.add_handler("x", lambda job: None)
    return w

not_a_worker = 42
"""


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    name = f"wapp_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(APP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(SDK_TESTS), *sys.path])
    for var in ("DUETIME_URL", "DUETIME_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    yield tmp_path / name
    sys.modules.pop(name, None)


def test_load_worker_object_and_factory(app_dir: Path) -> None:
    assert isinstance(load_worker(f"{app_dir.name}:worker"), Worker)
    made = load_worker(f"{app_dir.name}:make")
    assert isinstance(made, Worker) and made.handler_names == ["x"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "must look like MODULE:OBJECT"),
        ("surely_missing_module_xyz:worker", "cannot import"),
        ("{app}:missing", "has no attribute 'missing'"),
        ("{app}:not_a_worker", "is a int, not a duetime.Worker"),
    ],
)
def test_load_worker_errors(
    app_dir: Path, spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as caught:
        load_worker(spec.format(app=app_dir.name))
    assert caught.value.exit_code == 2
    assert message in capsys.readouterr().err


def test_worker_command_drains_and_prints_stats(
    app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))  # not in pytest's process
    result = CliRunner().invoke(
        cli.app,
        [
            "worker",
            f"{app_dir.name}:worker",
            "--until-empty",
            "-c",
            "3",
            "--worker-id",
            "cli-w",
            "--log-level",
            "warning",
        ],
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["worker_id"] == "cli-w" and stats["succeeded"] == 5 and stats["failed"] == 0
    assert frozen == [True]
    module = sys.modules[app_dir.name]
    worker = module.worker
    assert worker.concurrency == 3
    outcomes = module.api.outcomes
    assert sorted(body["result"] for _, body in outcomes.values()) == [0, 2, 4, 6, 8]
    assert {b["worker_id"] for b in module.api.bodies("/lease")} == {"cli-w"}


def test_worker_command_rejects_bad_flags(app_dir: Path) -> None:
    result = CliRunner().invoke(cli.app, ["worker", f"{app_dir.name}:worker", "-c", "0"])
    assert result.exit_code == 2


def test_configure_url_replaces_a_given_client(app_dir: Path) -> None:
    from worker_fakes import FakeLeaseApi

    worker = Worker(FakeLeaseApi().client())
    worker.configure(api_key="dt_other")
    assert worker._client is None and worker._url == "http://duetime.test"
    assert worker._api_key == "dt_other"
    worker.configure(url="http://127.0.0.1:9", queues=["a", "b"], worker_id="x")
    assert worker._url == "http://127.0.0.1:9" and worker.queues == ("a", "b")
    assert worker.worker_id == "x"
