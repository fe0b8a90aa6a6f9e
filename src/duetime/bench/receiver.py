"""A minimal, fast webhook receiver for benchmarks and acceptance tests (loopback only).

It answers every POST with ``204`` and records, per request, the ``duetime-task-id``,
``duetime-attempt``, ``webhook-id`` and ``duetime-scheduled-for`` headers and the arrival time.
``GET /_records`` returns every record as JSON lines; ``GET /_count`` the number of requests.
``fail_every=N`` answers every Nth request with 500, for retry paths.

Built on httptools over a raw asyncio protocol (uvloop when present), because a receiver slower
than duetime would measure itself instead.
"""

from __future__ import annotations

import asyncio
import sys
import time

import httptools
import orjson


class _State:
    def __init__(self, fail_every: int) -> None:
        self.records: list[tuple[str, int, str, float, str]] = []
        self.requests = 0
        self.fail_every = fail_every


class RequestProtocol(asyncio.Protocol):
    """The httptools plumbing of a loopback receiver: it gathers each request's URL and headers
    (lower-cased names) and calls :meth:`on_message_complete`, which a subclass writes; a request
    that is not HTTP closes the connection."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.headers: dict[bytes, bytes] = {}
        self.url = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def on_message_begin(self) -> None:
        self.headers = {}
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_message_complete(self) -> None:
        raise NotImplementedError


class _Protocol(RequestProtocol):
    def __init__(self, state: _State) -> None:
        super().__init__()
        self.state = state

    def on_message_complete(self) -> None:
        assert self.transport is not None
        state = self.state
        if self.url.startswith(b"/_records"):
            body = b"".join(
                orjson.dumps(
                    {"task_id": t, "attempt": a, "webhook_id": w, "at": at, "scheduled_for": s}
                )
                + b"\n"
                for t, a, w, at, s in state.records
            )
            self._reply(b"200 OK", body)
            return
        if self.url.startswith(b"/_count"):
            self._reply(b"200 OK", str(state.requests).encode())
            return
        state.requests += 1
        h = self.headers
        state.records.append(
            (
                h.get(b"duetime-task-id", b"").decode(),
                int(h.get(b"duetime-attempt", b"0")),
                h.get(b"webhook-id", b"").decode(),
                time.time(),
                h.get(b"duetime-scheduled-for", b"").decode(),
            )
        )
        if state.fail_every and state.requests % state.fail_every == 0:
            self._reply(b"500 Internal Server Error", b"")
        else:
            self._reply(b"204 No Content", None)

    def _reply(self, status: bytes, body: bytes | None) -> None:
        assert self.transport is not None
        if body is None:
            self.transport.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\n\r\n")
        else:
            self.transport.write(
                b"HTTP/1.1 "
                + status
                + b"\r\ncontent-length: "
                + str(len(body)).encode()
                + b"\r\ncontent-type: application/json\r\n\r\n"
                + body
            )


async def serve(port: int, fail_every: int = 0, host: str = "127.0.0.1") -> None:
    state = _State(fail_every)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(state), host, port, backlog=4096)
    print(f"receiver listening on {host}:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """``python -m duetime.bench.receiver PORT [FAIL_EVERY]``"""
    args = sys.argv[1:] if argv is None else argv
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    asyncio.run(serve(int(args[0]), int(args[1]) if len(args) > 1 else 0))


if __name__ == "__main__":
    main()
