"""``duetime dev-receiver``: a webhook receiver for trying duetime out on a laptop.

It answers every request ``200`` (or the status given with ``--status``) and prints one line per
delivery: the time, the method and path, the task id and attempt from duetime's headers, and the
body. Standard library only (it runs in the lean client install), loopback by default, and not a
production receiver: it does not verify signatures (see docs/api.md, "Webhook delivery").
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated

import typer

from duetime.text import clean

MAX_SHOWN_BYTES = 2048


def make_server(host: str, port: int, status: int) -> ThreadingHTTPServer:
    """A server on ``host:port`` (0: any free port) that answers ``status`` and prints."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            task = self.headers.get("duetime-task-id", "-")
            attempt = self.headers.get("duetime-attempt", "-")
            shown = clean(body.decode("utf-8", "replace"), MAX_SHOWN_BYTES)
            stamp = datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]
            print(
                f"{stamp} {self.command} {clean(self.path, 512)} task={task} "
                f"attempt={attempt} {shown}",
                flush=True,
            )
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        do_POST = do_PUT = do_PATCH = do_GET = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per delivery is printed above; no second access log

    return ThreadingHTTPServer((host, port), Handler)


def dev_receiver(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9000,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    status: Annotated[
        int, typer.Option(min=100, max=599, help="Status to answer (e.g. 500 to see retries).")
    ] = 200,
) -> None:
    """Receive webhooks on http://127.0.0.1:9000/ and print each delivery (for trying duetime
    out; it does not verify signatures)."""
    try:
        server = make_server(host, port, status)
    except OSError as exc:
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
    print(f"receiving webhooks on http://{host}:{server.server_port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.stdout.flush()
