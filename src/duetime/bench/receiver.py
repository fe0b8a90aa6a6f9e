"""A minimal, fast webhook receiver for benchmarks and acceptance tests (loopback only).

It answers every POST with ``204`` and records, per request, the ``duetime-task-id``,
``duetime-attempt``, ``webhook-id`` and ``duetime-scheduled-for`` headers, the path, the arrival
time (``at``) and the time it answered (``end``). ``GET /_records`` returns every record as JSON
lines; ``GET /_count`` the number of requests; ``GET /_stats`` a JSON object with ``requests``,
``inflight`` (requests not answered yet) and ``max_inflight`` (the most at once so far).
``fail_every=N`` answers every Nth request with 500, for retry paths.

Two paths answer otherwise, for flow-control measurements (SPEC §7): ``/delay/MS`` answers after
MS milliseconds (a handler that works), and ``/hang`` never answers (a target that hangs): its
``end`` is when the caller gave up and closed the connection, ``null`` while it waits.
``/status/CODE`` answers with that status (a target that refuses: ``/status/410``), and
``/status/CODE/MS`` so after MS milliseconds. Under
``/body/`` a request's body is recorded too (``body``, else null) and the answer is ``200`` with
``{"echo": "<task id>"}`` (a result its children see); ``/body/delay/MS`` answers so after MS
milliseconds.

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
        self.records: list[list[object]] = []
        """Per request: task id, attempt, webhook id, arrival, scheduled for, end, path."""
        self.requests = 0
        self.inflight = 0
        self.max_inflight = 0
        self.fail_every = fail_every

    def answered(self, record: list[object], at: float) -> None:
        record[5] = at
        self.inflight -= 1


class RequestProtocol(asyncio.Protocol):
    """The httptools plumbing of a loopback receiver: it gathers each request's URL and headers
    (lower-cased names) and calls :meth:`on_message_complete`, which a subclass writes; a request
    that is not HTTP closes the connection."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.headers: dict[bytes, bytes] = {}
        self.url = b""
        self.body = b""

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
        self.body = b""

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_message_complete(self) -> None:
        raise NotImplementedError


_FIELDS = ("task_id", "attempt", "webhook_id", "at", "scheduled_for", "end", "path", "body")


class _Protocol(RequestProtocol):
    def __init__(self, state: _State) -> None:
        super().__init__()
        self.state = state
        self.waiting: list[list[object]] = []
        """Records of this connection's requests not answered yet (delayed or hanging)."""

    def on_message_complete(self) -> None:
        assert self.transport is not None
        state = self.state
        if self.url.startswith(b"/_records"):
            body = b"".join(
                orjson.dumps(dict(zip(_FIELDS, record, strict=True))) + b"\n"
                for record in state.records
            )
            self._reply(b"200 OK", body)
            return
        if self.url.startswith(b"/_count"):
            self._reply(b"200 OK", str(state.requests).encode())
            return
        if self.url.startswith(b"/_stats"):
            figures = {
                "requests": state.requests,
                "inflight": state.inflight,
                "max_inflight": state.max_inflight,
            }
            self._reply(b"200 OK", orjson.dumps(figures))
            return
        state.requests += 1
        state.inflight += 1
        state.max_inflight = max(state.max_inflight, state.inflight)
        h = self.headers
        at = time.time()
        kept = self.url.startswith(b"/body/")
        status = self.url.startswith(b"/status/")
        waits = self.url.startswith((b"/hang", b"/delay/", b"/body/delay/")) or (
            status and len(self.url) > 12
        )
        record: list[object] = [
            h.get(b"duetime-task-id", b"").decode(),
            int(h.get(b"duetime-attempt", b"0")),
            h.get(b"webhook-id", b"").decode(),
            at,
            h.get(b"duetime-scheduled-for", b"").decode(),
            None if waits else at,
            self.url.decode(errors="replace"),
            _json(self.body) if kept else None,
        ]
        state.records.append(record)
        if waits and (kept or status):
            self.waiting.append(record)
            millis = self.url[12:].split(b"?")[0]
            delay = int(millis) / 1000 if millis.isdigit() else 0.0
            asyncio.get_running_loop().call_later(delay, self._answer_later, record)
        elif kept:
            state.inflight -= 1
            self._reply(b"200 OK", orjson.dumps({"echo": record[0]}))
        elif status:
            state.inflight -= 1
            self._reply(self.url[8:11] + b" Status", b"")
        elif waits:
            self.waiting.append(record)
            if self.url.startswith(b"/delay/"):
                millis = self.url[7:].split(b"?")[0]
                delay = int(millis) / 1000 if millis.isdigit() else 0.0
                asyncio.get_running_loop().call_later(delay, self._answer_later, record)
        else:
            state.inflight -= 1  # answered at once
            if state.fail_every and state.requests % state.fail_every == 0:
                self._reply(b"500 Internal Server Error", b"")
            else:
                self._reply(b"204 No Content", None)

    def _answer_later(self, record: list[object]) -> None:
        if not any(r is record for r in self.waiting):  # the caller gave up first
            return
        self.waiting = [r for r in self.waiting if r is not record]
        self.state.answered(record, time.time())
        path = str(record[6])
        if path.startswith("/body/"):
            self._reply(b"200 OK", orjson.dumps({"echo": record[0]}))
        elif path.startswith("/status/"):
            self._reply(path[8:11].encode() + b" Status", b"")
        else:
            self._reply(b"204 No Content", None)

    def connection_lost(self, exc: Exception | None) -> None:
        now = time.time()
        for record in self.waiting:
            self.state.answered(record, now)
        self.waiting.clear()

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


def _json(body: bytes) -> object:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return body.decode(errors="replace")


async def open_receiver(
    port: int = 0, fail_every: int = 0, host: str = "127.0.0.1"
) -> asyncio.Server:
    """A receiver listening on ``host``:``port`` (0: a free port) in the running loop."""
    state = _State(fail_every)
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Protocol(state), host, port, backlog=4096)


async def serve(port: int, fail_every: int = 0, host: str = "127.0.0.1") -> None:
    server = await open_receiver(port, fail_every, host)
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
