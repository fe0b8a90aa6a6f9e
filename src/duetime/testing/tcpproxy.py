"""A loopback TCP proxy that a test can cut, stall and restore, to play a store outage for real:
cut, connections are refused and live ones are dropped, exactly as when a database goes away;
stalled, connections stay open but no byte passes either way (new ones are accepted and wait),
as in a network partition where TCP keeps retrying — then everything flows again."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port`` on a background thread.

    :meth:`cut` closes the listener and every open connection; :meth:`stall` holds every byte
    (open and new connections alike) without closing anything; :meth:`restore` heals both:
    listens again on the same port and lets held bytes through.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()

    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        self._call(self._cut())

    def stall(self) -> None:
        self._call(self._set_flowing(False))

    def restore(self) -> None:
        self._call(self._set_flowing(True))
        if self._server is None:
            self._call(self._listen())

    def close(self) -> None:
        self._call(self._cut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _set_flowing(self, flowing: bool) -> None:
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _listen(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._writers.discard(writer)
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.discard(writer)
        self._writers.discard(up_writer)
