"""``duetime dev-receiver``: answers every delivery and prints one line per delivery."""

from __future__ import annotations

import threading

import httpx
import pytest

from duetime.cli.dev_receiver import make_server


@pytest.mark.parametrize("status", [200, 503])
def test_prints_each_delivery_and_answers_the_status(
    status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_server("127.0.0.1", 0, status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        answer = httpx.post(
            url,
            content=b'{"report": "daily"}\x1b[31m',
            headers={"duetime-task-id": "t-1", "duetime-attempt": "2"},
        )
        assert answer.status_code == status
    finally:
        server.shutdown()
        server.server_close()
    out = capsys.readouterr().out
    assert 'POST /hook task=t-1 attempt=2 {"report": "daily"}' in out
    assert "\x1b" not in out  # a body cannot drive the terminal
