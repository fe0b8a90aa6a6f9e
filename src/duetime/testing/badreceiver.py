"""A webhook receiver that misbehaves on purpose, for the fault suite (loopback only).

The path says how to answer a POST; ``?bad=N`` misbehaves only on attempts ``1..N`` (the
``duetime-attempt`` header) and answers ``204`` after, so a task can recover (default: always
misbehave):

================  ===============================================================================
``/ok``           ``204`` at once
``/hang``         reads the request and never answers (the connection stays open)
``/reset``        closes the connection with a TCP reset (``SO_LINGER`` 0) instead of answering
``/slow``         answers ``204`` after ``?delay=`` seconds (default 0.5), the status line first
                  and the rest a moment later
``/nonhttp``      answers bytes that are not HTTP at all (NUL, 0xFF, binary) and closes
``/hugeheaders``  a status line, then 1 MiB of header lines
``/nul``          ``500`` (or ``?status=``) whose body holds NUL bytes, other control characters
                  and invalid UTF-8
================  ===============================================================================

Every POST is recorded (task id, attempt, mode, arrival time) whatever the answer:
``GET /_records`` returns them as JSON lines, ``GET /_count`` their number.

``python -m duetime.testing.badreceiver PORT``
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from urllib.parse import parse_qs, urlsplit

import orjson

from duetime.bench.receiver import RequestProtocol

_GARBAGE = b"\x00\xff\xfe SSH-2.0-not-http \x00\x01\x02\r\n\r\n\x80\x81" * 8
_NUL_BODY = b'{"error": "bad\x00reply", "ctl": "\x01\x02\x1b[31m", "bytes": "\xff\xfe\xc3\x28"}\x00'


class _State:
    def __init__(self) -> None:
        self.records: list[tuple[str, int, str, float]] = []
        self.hanging: list[asyncio.Transport] = []


class _Protocol(RequestProtocol):
    def __init__(self, state: _State) -> None:
        super().__init__()
        self.state = state

    def on_message_complete(self) -> None:
        parts = urlsplit(self.url.decode("latin-1"))
        mode = parts.path.strip("/") or "ok"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if mode == "_records":
            body = b"".join(
                orjson.dumps({"task_id": t, "attempt": a, "mode": m, "at": at}) + b"\n"
                for t, a, m, at in self.state.records
            )
            self._write(b"200 OK", body, close=False)
            return
        if mode == "_count":
            self._write(b"200 OK", str(len(self.state.records)).encode(), close=False)
            return
        attempt = int(self.headers.get(b"duetime-attempt", b"0") or 0)
        task_id = self.headers.get(b"duetime-task-id", b"").decode("latin-1")
        self.state.records.append((task_id, attempt, mode, time.time()))
        bad = int(query.get("bad", "1000000"))
        self._answer(mode if attempt <= bad else "ok", query)

    def _answer(self, mode: str, query: dict[str, str]) -> None:
        transport = self.transport
        assert transport is not None
        if mode == "hang":
            self.state.hanging.append(transport)  # keep it referenced, never answer
        elif mode == "reset":
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        elif mode == "slow":
            delay = float(query.get("delay", "0.5"))
            loop = asyncio.get_running_loop()
            transport.write(b"HTTP/1.1 204 No Content\r\n")
            loop.call_later(delay, self._finish_slow, transport)
        elif mode == "nonhttp":
            transport.write(_GARBAGE)
            transport.close()
        elif mode == "hugeheaders":
            line = b"x-filler: " + b"a" * 1000 + b"\r\n"
            transport.write(b"HTTP/1.1 200 OK\r\n" + line * 1024 + b"content-length: 0\r\n\r\n")
            transport.close()
        elif mode == "nul":
            status = query.get("status", "500").encode()
            self._write(status + b" Bad", _NUL_BODY, close=True)
        else:
            self._write(b"204 No Content", b"", close=False)

    @staticmethod
    def _finish_slow(transport: asyncio.Transport) -> None:
        if not transport.is_closing():
            transport.write(b"content-length: 0\r\n\r\n")

    def _write(self, status: bytes, body: bytes, *, close: bool) -> None:
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 "
            + status
            + b"\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\ncontent-type: application/json\r\n"
            + (b"connection: close\r\n" if close else b"")
            + b"\r\n"
            + body
        )
        if close:
            self.transport.close()


async def serve(port: int, host: str = "127.0.0.1") -> None:
    state = _State()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(state), host, port, backlog=4096)
    print(f"bad receiver listening on {host}:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """``python -m duetime.testing.badreceiver PORT``"""
    args = sys.argv[1:] if argv is None else argv
    asyncio.run(serve(int(args[0])))


if __name__ == "__main__":
    main()
