"""Every error is one line on stderr and the exit status README's table gives it, never a
traceback."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from cli_helpers import TASK_ID, leaves, not_found, use_api
from typer.testing import CliRunner, Result

from duetime import cli
from duetime.errors import ConfigError
from duetime.sdk import Client


def test_api_errors_are_one_line_on_stderr(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_api(monkeypatch, lambda r: not_found(r.url.path))
    result = runner.invoke(cli.app, ["task", "get", "missing"])
    assert result.exit_code == 3  # not found
    assert result.stdout == ""
    assert result.stderr == "error: 404 Not found: no task with that id for this tenant\n"


def test_validation_errors_name_the_field(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "type": "urn:duetime:problem:validation",
        "title": "Invalid request",
        "status": 422,
        "detail": "target.url: must be an absolute URL",
        "field": "target.url",
    }
    use_api(monkeypatch, lambda r: httpx.Response(422, json=body))
    result = runner.invoke(cli.app, ["task", "create", "--target-url", "nope"])
    assert result.exit_code == 6  # invalid input
    assert result.stderr == (
        "error: 422 Invalid request: target.url: must be an absolute URL (field: target.url)\n"
    )


def test_unreachable_server_is_one_line(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    use_api(monkeypatch, refuse)
    result = runner.invoke(cli.app, ["task", "get", TASK_ID])
    assert result.exit_code == 5  # unreachable
    assert result.stderr.startswith("error: cannot reach http://127.0.0.1:8080")
    assert "Traceback" not in result.output


def test_version_and_distinct_exit_codes(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime import __version__

    shown = runner.invoke(cli.app, ["--version"])
    assert shown.exit_code == 0 and shown.stdout == f"duetime {__version__}\n"
    conflict = {
        "type": "urn:duetime:problem:conflict",
        "title": "Conflict",
        "status": 409,
        "detail": "task is finished",
    }
    use_api(monkeypatch, lambda r: httpx.Response(409, json=conflict))
    assert runner.invoke(cli.app, ["task", "cancel", TASK_ID]).exit_code == 4
    unavailable = {**conflict, "status": 503, "title": "Store unavailable", "detail": "down"}
    use_api(monkeypatch, lambda r: httpx.Response(503, json=unavailable))
    assert runner.invoke(
        cli.app, ["task", "get", TASK_ID, "--url", "http://127.0.0.1:1"]
    ).exit_code in (5,)
    assert runner.invoke(cli.app, ["task", "list", "--limit", "many"]).exit_code == 2  # usage


# -- servers that are not duetime, or not there --------------------------------------------------


def _answer(status: int, content_type: str, body: bytes) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _reply

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Answer


def _raw(reply: bytes) -> Callable[[socket.socket], None]:
    """A connection handler that reads the request, writes ``reply`` (maybe nothing) and closes."""

    def handle(conn: socket.socket) -> None:
        conn.recv(65536)
        if reply:
            conn.sendall(reply)
        conn.close()

    return handle


_HTTP_SERVERS = {
    "an HTML page answering 404": _answer(404, "text/html", b"<html><body>Not Found</body></html>"),
    "an HTML page answering 200": _answer(200, "text/html", b"<html><body>Welcome</body></html>"),
    "JSON of another shape": _answer(200, "application/json", b'{"hello": "world"}'),
    "a JSON 404 without a problem": _answer(404, "application/json", b'{"detail": "Not Found"}'),
}
_SOCKET_SERVERS = {
    "garbage instead of HTTP": _raw(b"\x00\x01 this is not HTTP\r\n\r\n"),
    "a connection closed unanswered": _raw(b""),
    "a connection dropped mid-answer": _raw(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n"
        b'{"id": "0190'
    ),
}


@contextlib.contextmanager
def loopback_server(kind: str) -> Iterator[str]:
    """A server on a free loopback port that behaves as ``kind`` says; its URL."""
    if kind in _HTTP_SERVERS:
        http = ThreadingHTTPServer(("127.0.0.1", 0), _HTTP_SERVERS[kind])
        thread = threading.Thread(target=http.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{http.server_port}"
        finally:
            http.shutdown()
            http.server_close()
        return
    listener = socket.create_server(("127.0.0.1", 0))
    handle = _SOCKET_SERVERS[kind]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


COMMANDS = [
    ["task", "get", TASK_ID],
    ["task", "get", "0190f000"],  # a prefix: looked up in the listing first
    ["task", "list"],
    ["schedule", "pause", "nightly-report"],  # a key: looked up first
    ["queue", "list"],
    ["history"],
]


def use_network(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """The CLI's real network client, through duetime.http1 (``lean``: installed with the
    server) or ``httpx`` (the client install's), with no retries (each case fails once, not
    four times)."""

    def factory(url: str, api_key: str | None) -> Client:
        if backend == "httpx":
            return Client(url, api_key, retries=0, transport=httpx.AsyncHTTPTransport())
        return Client(url, api_key, retries=0)

    monkeypatch.setattr(cli.common, "client_factory", factory)


@pytest.fixture(params=["lean", "httpx"])
def network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each of the CLI's network clients in turn (:func:`use_network`)."""
    use_network(monkeypatch, str(request.param))
    return str(request.param)


def one_error_line(result: Result) -> str:
    """The single ``error: ...`` line a failed command printed, having checked there is no
    traceback and nothing else on stderr."""
    assert isinstance(result.exception, SystemExit), result.exception  # not a crash
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("kind", [*_HTTP_SERVERS, *_SOCKET_SERVERS])
def test_a_server_that_is_not_duetime_is_one_line_and_exit_5(
    kind: str, network: str, runner: CliRunner
) -> None:
    with loopback_server(kind) as url:
        for command in COMMANDS:
            result = runner.invoke(cli.app, [*command, "--url", url])
            line = one_error_line(result)
            assert result.exit_code == 5, (command, line)
            assert url in line and "DUETIME_URL" in line, line


@pytest.mark.parametrize("kind", [*_HTTP_SERVERS, *_SOCKET_SERVERS])
def test_doctor_fails_its_node_check_at_a_server_that_is_not_duetime(
    kind: str, runner: CliRunner
) -> None:
    with loopback_server(kind) as url:
        result = runner.invoke(cli.app, ["doctor", "--url", url, "-o", "json"])
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert result.exit_code == 5, result.output
    [node] = json.loads(result.stdout)["items"]
    assert node["check"] == "node" and node["status"] == "fail"
    assert "DUETIME_URL" in node["detail"]


def test_a_refused_port_is_one_line_naming_where_to_point(network: str, runner: CliRunner) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    for command in COMMANDS:
        result = runner.invoke(cli.app, [*command, "--url", f"127.0.0.1:{port}"])  # no scheme
        line = one_error_line(result)
        assert result.exit_code == 5, (command, line)
        assert f"cannot reach http://127.0.0.1:{port}" in line
        assert "--url" in line and "DUETIME_URL" in line


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("127.0.0.1:18080", "http://127.0.0.1:18080"),
        ("localhost:9000/", "http://localhost:9000"),
        ("https://duetime.example:8443", "https://duetime.example:8443"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_a_url_without_a_scheme_is_http(
    given: str, used: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = use_api(
        monkeypatch, lambda r: httpx.Response(200, json={"items": [], "next_cursor": None})
    )
    result = runner.invoke(cli.app, ["task", "list", "--url", given])
    assert result.exit_code == 0, result.output
    assert api.clients == [(used, None)]


@pytest.mark.parametrize(
    "given", ["ftp://127.0.0.1:21", "http://", "127.0.0.1:notaport", "http://exa mple:80"]
)
def test_a_url_that_cannot_be_a_server_is_a_usage_error(
    given: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = use_api(monkeypatch, lambda r: httpx.Response(500))
    result = runner.invoke(cli.app, ["task", "list", "--url", given])
    assert result.exit_code == 2
    assert "--url" in one_error_line(result)
    assert api.requests == []


def _real_command(args: list[str], cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """The ``duetime`` entry point in its own process, with no ``DUETIME_*`` variable but
    ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    code = "import sys; sys.argv[0] = 'duetime'; from duetime.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**env, **variables},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_real_command_reports_a_refused_port_in_one_line(tmp_path: Path) -> None:
    """End to end: the installed entry point, its own retries, no traceback."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    done = _real_command(["task", "list"], tmp_path, DUETIME_URL=f"127.0.0.1:{port}")
    assert done.returncode == 5, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach http://127.0.0.1:{port}") and "DUETIME_URL" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["task", "list", "--bogus"], "No such option: --bogus (see 'duetime task list --help')"),
        (["tasks"], "No such command 'tasks'. Did you mean 'task'? (see 'duetime --help')"),
        (["task", "list", "--limit", "abc"], "Invalid value for '--limit'"),
        (["task", "get"], "Missing argument 'ID'. (see 'duetime task get --help')"),
    ],
)
def test_usage_errors_of_the_real_command_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    """Usage errors come from click, outside every command: the entry point words them as the
    commands word theirs (no boxed panel, no traceback)."""
    done = _real_command(args, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and says in line, line


# -- the client's DUETIME_* variables --------------------------------------------------------------


def test_an_unknown_duetime_variable_stops_a_client_command(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = use_api(
        monkeypatch, lambda r: httpx.Response(200, json={"items": [], "next_cursor": None})
    )
    result = runner.invoke(cli.app, ["task", "list"], env={"DUETIME_URLL": "http://x"})
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "error: unknown setting DUETIME_URLL (did you mean DUETIME_URL?); unset it or fix its name"
    )
    assert api.requests == []
    doctor = runner.invoke(cli.app, ["doctor"], env={"DUETIME_API_KEYS": "k"})
    assert doctor.exit_code == 1 and "did you mean DUETIME_API_KEY?" in one_error_line(doctor)


def test_known_variables_of_either_side_pass(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_api(monkeypatch, lambda r: httpx.Response(200, json={"items": [], "next_cursor": None}))
    env = {
        "DUETIME_API_KEY": "dt_x",  # the client's
        "DUETIME_DB": "sqlite:///x.db",  # the server's: one shell often serves both
        "DUETIME_LOG_FORMAT": "json",
        "DUETIME_TEST_ANYTHING": "1",  # the test suite's own prefix
    }
    result = runner.invoke(cli.app, ["task", "list"], env=env)
    assert result.exit_code == 0, result.output


def test_without_the_server_installed_only_the_clients_variables_are_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from duetime.cli.connection import check_client_environment

    check_client_environment({"DUETIME_URL": "x", "DUETIME_DB": "sqlite:///x.db"})
    monkeypatch.setitem(sys.modules, "duetime.config", None)  # as in `pip install duetime`
    check_client_environment({"DUETIME_URL": "x", "DUETIME_METRICS_TOKEN": "t"})
    with pytest.raises(ConfigError, match="did you mean DUETIME_API_KEY"):
        check_client_environment({"DUETIME_APIKEY": "x"})
    with pytest.raises(ConfigError, match="unknown setting DUETIME_DB"):
        check_client_environment({"DUETIME_DB": "sqlite:///x.db"})


_VALUES = {
    "--start": "2029-01-01T00:00:00Z",
    "--end": "2029-01-02T00:00:00Z",
    "--error": "boom",
}
"""Values of the options some commands require."""


def _invocation(words: tuple[str, ...], command: Any) -> list[str]:
    """``words`` with every argument and required option of ``command`` given, and --yes."""
    args = list(words)
    for param in command.params:
        if param.param_type_name == "argument":
            args.append(TASK_ID)
        elif param.required:
            args += [param.opts[0], _VALUES[param.opts[0]]]
        elif "--yes" in param.opts:
            args.append("--yes")
    return args


@pytest.mark.parametrize(
    "kind", ["an HTML page answering 200", "JSON of another shape", "a JSON 404 without a problem"]
)
def test_no_api_command_crashes_on_an_answer_it_cannot_read(
    kind: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_network(monkeypatch, "lean")  # the parsing is the SDK's whichever network carries it
    every = leaves(typer.main.get_command(cli.app))
    api = {w: c for w, c in every.items() if any("--url" in p.opts for p in c.params)}
    reached = 0
    with loopback_server(kind) as url:
        for words, command in sorted(api.items()):
            if words in (("worker",), ("doctor",)):  # runs an app / prints its checks
                continue
            if words in (
                ("admin", "key-delete"),
                ("admin", "tenant-delete"),
                ("credential", "delete"),
            ):
                continue  # duetime answers them 204, no body: any 2xx reads as done
            result = runner.invoke(cli.app, [*_invocation(words, command), "--url", url])
            assert result.exit_code != 0, words
            line = one_error_line(result)
            assert result.exit_code in (2, 5), (words, line)  # usage before any call, or 5
            reached += result.exit_code == 5
    assert reached > 35  # most commands got as far as the server
