"""Real processes for benchmarks and acceptance tests: duetime nodes and webhook receivers,
each a subprocess on loopback, started and stopped with their output kept for diagnosis."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``check`` every 0.1 s until it is true; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def metric_total(base_url: str, name: str, label: str, client: httpx.Client | None = None) -> float:
    """The sum of a node's ``/metrics`` samples of ``name`` whose labels contain ``label``
    (e.g. ``'status="succeeded"'``). A caller that polls passes its one ``client`` (see
    :func:`wait_delivered`)."""
    get = httpx.get if client is None else client.get
    text = get(base_url + "/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and label in line
    )


def wait_http(url: str, timeout: float = 20.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until ``url`` answers 200 (or the process dies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


@dataclass
class Proc:
    """A started subprocess with its log file."""

    popen: subprocess.Popen[bytes]
    log_path: Path
    url: str

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, as in a crash."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _spawn(args: list[str], env: Mapping[str, str], log_path: Path, url: str) -> Proc:
    log = log_path.open("wb")
    popen = subprocess.Popen(args, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    return Proc(popen, log_path, url)


def start_receiver(workdir: Path, *, fail_every: int = 0) -> Proc:
    port = free_port()
    proc = _spawn(
        [sys.executable, "-m", "duetime.bench.receiver", str(port), str(fail_every)],
        os.environ,
        workdir / f"receiver-{port}.log",
        f"http://127.0.0.1:{port}",
    )
    wait_http(proc.url + "/_count", proc=proc.popen)
    return proc


def receiver_records(url: str) -> list[dict[str, object]]:
    body = httpx.get(url + "/_records", timeout=30).content
    return [orjson.loads(line) for line in body.splitlines() if line]


def first_arrivals(records: list[dict[str, object]]) -> dict[str, float]:
    """Each task's first delivery time (unix seconds) among the receiver's ``records``."""
    first: dict[str, float] = {}
    for r in records:
        first.setdefault(str(r["task_id"]), float(r["at"]))  # type: ignore[arg-type]
    return first


def wait_delivered(url: str, count: int, timeout: float, interval: float = 0.05) -> None:
    """Poll the receiver at ``url`` until it has ``count`` requests; RuntimeError after
    ``timeout`` seconds. One client for the whole poll: ``httpx.get()`` builds a client (and its
    TLS context, ~20 ms of CPU) per call, which took a quarter of a core from a measured burst."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=10) as poll:
        while (got := int(poll.get(url + "/_count").text)) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {got} of {count} delivered")
            time.sleep(interval)


@dataclass
class NodeOptions:
    db: str
    env: dict[str, str] = field(default_factory=dict)
    engine: bool = True


def start_node(workdir: Path, options: NodeOptions, name: str = "node") -> Proc:
    """A ``duetime serve`` process on a free loopback port."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env.update(
        {
            "DUETIME_DB": options.db,
            "DUETIME_PORT": str(port),
            "DUETIME_HOST": "127.0.0.1",
            "DUETIME_DATA_DIR": str(workdir / "data"),
            "DUETIME_NODE_ID": f"{name}-{port}",
            "DUETIME_ENGINE": "true" if options.engine else "false",
            "DUETIME_LOG_LEVEL": "warning",
        }
    )
    env.update(options.env)
    proc = _spawn(
        [sys.executable, "-m", "duetime", "serve"],
        env,
        workdir / f"{name}-{port}.log",
        f"http://127.0.0.1:{port}",
    )
    try:
        wait_http(proc.url + "/healthz", proc=proc.popen, timeout=30)
    except Exception as exc:
        proc.kill()
        raise RuntimeError(f"{name} did not start: {exc}\n{proc.log()}") from exc
    return proc


@contextlib.contextmanager
def running(*procs: Proc) -> Iterator[tuple[Proc, ...]]:
    try:
        yield procs
    finally:
        for proc in procs:
            proc.stop(5)
