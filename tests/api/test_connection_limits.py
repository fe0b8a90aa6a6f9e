"""What one connection may cost a node, with real sockets against ``duetime serve``: a client
that sends nothing, half a head, a head a byte at a time or half a body is answered 408 and
disconnected after the timeout; an idle kept-alive connection is closed; a head without end is a
431; past the cap of open connections a new one is refused with a 503 problem at once, the
connections already open are served, and once the crowd leaves everyone is served again."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from duetime.bench.harness import NodeOptions, Proc, start_node

pytestmark = pytest.mark.acceptance  # a real node and timing bounds

TIMEOUT = 1.0
CAP = 20
SETTINGS = {
    "DUETIME_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
    "DUETIME_BODY_TIMEOUT_SECONDS": str(TIMEOUT),
    "DUETIME_KEEP_ALIVE_SECONDS": "1",
    "DUETIME_MAX_CONNECTIONS": str(CAP),
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    # Connections are the HTTP server's business alone: the embedded store will do.
    workdir = tmp_path_factory.mktemp("connections")
    proc = start_node(workdir, NodeOptions(db="", env=SETTINGS, engine=False))
    try:
        yield proc
    finally:
        proc.stop()


def connect(node: Proc) -> socket.socket:
    parts = urlsplit(node.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return sock


def until_closed(sock: socket.socket, limit: float = 10.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    sock.settimeout(limit)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def problem_of(answer: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, orjson.loads(body)


def assert_refused(answer: bytes, status: int) -> dict[str, str]:
    code, headers, problem = problem_of(answer)
    assert code == status, answer
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert headers["x-content-type-options"] == "nosniff"
    assert problem["status"] == status and problem["detail"]
    return headers


def test_a_client_that_sends_nothing_is_disconnected(node: Proc) -> None:
    with connect(node) as sock:
        answer, took = until_closed(sock)
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 2
    assert_refused(answer, 408)


def test_half_a_head_and_a_head_a_byte_at_a_time_are_disconnected(node: Proc) -> None:
    with connect(node) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer, took = until_closed(sock)
    assert took < TIMEOUT + 2
    assert_refused(answer, 408)
    with connect(node) as sock:  # each byte in time, the whole head never: still cut
        started = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                sock.sendall(bytes([byte]))
                time.sleep(0.1)
        answer, _ = until_closed(sock)
        took = time.monotonic() - started
    assert took < TIMEOUT + 2
    assert_refused(answer, 408)


def test_half_a_body_is_disconnected(node: Proc) -> None:
    with connect(node) as sock:
        sock.sendall(
            b"POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"target":'
        )
        answer, took = until_closed(sock)
    assert took < TIMEOUT + 2
    assert_refused(answer, 408)


def test_an_idle_kept_alive_connection_is_closed(node: Proc) -> None:
    with connect(node) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer, took = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"408" not in answer.split(b"\r\n\r\n", 2)[-1]  # just closed, nothing more said
    assert took < 1 + 2


def test_a_head_without_end_is_431(node: Proc) -> None:
    with connect(node) as sock:
        with contextlib.suppress(OSError):  # the server may close while we still send
            sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Huge: " + b"a" * (2 * 1024 * 1024))
        answer, _ = until_closed(sock)
    assert_refused(answer, 431)


def test_connections_past_the_cap_are_refused_and_the_node_recovers(node: Proc) -> None:
    held = [connect(node) for _ in range(CAP)]
    try:
        time.sleep(0.2)  # every one of them accepted
        extra = [connect(node) for _ in range(5)]
        for sock in extra:
            answer, took = until_closed(sock)
            assert took < 1.0  # refused at once, not after a timeout
            headers = assert_refused(answer, 503)
            assert headers["retry-after"] == "1"
            sock.close()
        # The connections already open are served as before.
        held[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer, _ = until_closed(held[0])
        assert answer.startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    for _ in range(3):
        assert httpx.get(node.url + "/healthz", timeout=5).status_code == 200
