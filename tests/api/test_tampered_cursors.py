"""Tampered pagination cursors are a 400 naming ``cursor`` on every paged list, alike on both
stores: numbers past 64 bits, other scripts' digits, signs, NUL, text that is no cursor at all.
None reaches the store (which would refuse it in its own words, or answer a 500)."""

from __future__ import annotations

import base64

import httpx
from api_helpers import assert_problem, case

WORKER = {"type": "worker"}


def opaque(text: str) -> str:
    """``text`` wrapped the way the server wraps its cursors (URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


NOT_CURSORS = ["", "!!", "a\x00b", "\u0663\u0664", "Zm9v", "%", "=" * 8]
"""Text that is no cursor of any list (sent as it is)."""


async def test_tampered_cursors_are_400_naming_cursor(api: httpx.AsyncClient) -> None:
    made = await api.post("/v1/schedules", json={"every": "PT1M", "task": {"target": WORKER}})
    sid = made.json()["id"]
    tampered = {
        "/v1/history": [
            "h1.0.9223372036854775808",  # one past the largest 64-bit id
            "h1.0.99999999999999999999999",
            "h1.99999999999999999999.1",
            "h1.0.-1",
            "h1.-5.1",
            "h1.+5.1",
            "h1.1_0.1",
            "h1. 5.1",
            "h1.\u0661\u0662.1",  # Arabic-Indic digits, which int() would take
            "h1.0.1\x00",
            "h1.0",
            "h2.0.1",
        ],
        f"/v1/schedules/{sid}/ticks": [
            "99999999999999999999999:fired",
            "9223372036854775808:fired",
            "-1:fired",
            "+5:fired",
            "\u0661:fired",
            "\u00b2:fired",
            "5:fired\x00",
            "5:exploded",
            "5",
        ],
        f"/v1/schedules/{sid}/revisions": [
            "9223372036854775808",
            "\u00b2",  # a superscript two: str.isdigit() says yes, int() says no
            "\u0661\u0662",
            "1\x00",
            "-1",
            "1_000",
        ],
        "/v1/tasks": ["0190f3a2-7c00-7000-8000-00000000000\x00", "\u0661" * 36],
        "/v1/schedules": ["9223372036854775808", "a\x00b"],
    }
    for path, texts in tampered.items():
        for text in texts:
            with case((path, text)):
                resp = await api.get(path, params={"cursor": opaque(text)})
                assert_problem(resp, 400, "cursor")
        for text in NOT_CURSORS:
            with case((path, "raw", text)):
                resp = await api.get(path, params={"cursor": text})
                if text == "":  # an empty cursor is the first page
                    assert resp.status_code == 200, resp.text
                else:
                    assert_problem(resp, 400, "cursor")


async def test_the_cursors_the_server_issues_still_page(api: httpx.AsyncClient) -> None:
    made = await api.post("/v1/schedules", json={"every": "PT1M", "task": {"target": WORKER}})
    sid = made.json()["id"]
    for jitter in (1, 2, 3):
        await api.patch(f"/v1/schedules/{sid}", json={"jitter_seconds": jitter})
    first = (await api.get(f"/v1/schedules/{sid}/revisions", params={"limit": 2})).json()
    rest = await api.get(
        f"/v1/schedules/{sid}/revisions", params={"limit": 2, "cursor": first["next_cursor"]}
    )
    assert rest.status_code == 200 and len(rest.json()["items"]) == 2
    page = (await api.get("/v1/history", params={"limit": 1})).json()
    more = await api.get("/v1/history", params={"limit": 1, "cursor": page["next_cursor"]})
    assert more.status_code == 200 and more.json()["items"]
