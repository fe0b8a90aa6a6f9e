"""``duetime doctor``: check a deployment and say what is wrong, one line per check.

Through the HTTP API (``--url``/``--api-key``): the node answers (``/healthz``); its store is
reachable and migrated (``/readyz``); this machine's clock against the node's (the ``Date``
header, 1 s resolution); whether the node holds the engine's leadership (``/metrics``, which
needs the metrics or admin token outside dev mode); and each queue's lag (the oldest due task's
wait). With ``--db`` (needs ``duetime[server]``) also directly against the store: reachable,
migrations pending, audit records waiting to be moved into the history table (PostgreSQL), and
its clock against this machine's — what a node on this host would see.

Each check is ``ok``, ``warn`` or ``fail``; any ``fail`` exits 1 (5 when the node cannot be
reached at all).
"""

from __future__ import annotations

import asyncio
import email.utils
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Literal

import httpx
import typer

from duetime.cli.common import (
    EXIT_ERROR,
    EXIT_UNREACHABLE,
    ApiKeyOption,
    DbOption,
    UrlOption,
    errors_reported,
    server_module,
)
from duetime.cli.connection import WHERE, api_key_given, check_client_environment, server_url
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.sdk.client import DEFAULT_URL

MAX_CLOCK_OFFSET_SECONDS = 2.0
"""Beyond this, a warning: the Date header has a 1 s resolution, and due times are exact."""

MAX_HISTORY_PENDING = 10_000
"""Beyond this many statements' audit records waiting to be moved (PostgreSQL writes them behind,
ADR 0008), a warning: a burst leaves about a thousand for seconds; many more means no node has
been leading, and history reads slow down by ~1 µs per waiting record."""


Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: what was checked, ``ok``/``warn``/``fail``, and what was seen."""

    check: str
    status: Status
    detail: str


def _within(offset: float) -> Status:
    return "ok" if abs(offset) <= MAX_CLOCK_OFFSET_SECONDS else "warn"


def _offset(remote: datetime) -> float:
    return (remote - datetime.now(UTC)).total_seconds()


def api_checks(
    url: str, api_key: str | None, metrics_token: str | None, max_lag: float
) -> list[Check]:
    """The checks made through the HTTP API (see the module docs). A node that cannot be
    reached, or that answers what no duetime node would (not JSON where JSON is due), fails the
    ``node`` check and ends the API checks."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    checks: list[Check] = []
    with httpx.Client(base_url=url, headers=headers, timeout=5.0) as http:
        try:
            _node_checks(http, url, metrics_token or api_key, max_lag, checks)
        except httpx.HTTPError as exc:
            return [Check("node", "fail", f"cannot reach {url}: {exc}; {WHERE}")]
        except (ValueError, KeyError, TypeError, AttributeError):  # an answer of another shape
            return [Check("node", "fail", f"{url} does not answer as duetime does; {WHERE}")]
    return checks


def _node_checks(
    http: httpx.Client, url: str, token: str | None, max_lag: float, checks: list[Check]
) -> None:
    """Append the checks of a node that answers; raises ``ValueError`` (and the like) for
    answers that are not duetime's."""
    health = http.get("/healthz")
    if not health.is_success:  # a node that runs answers 200: the rest would say nothing more
        checks.append(Check("node", "fail", f"{url} answers {health.status_code}; {WHERE}"))
        return
    if health.json().get("status") != "ok":  # JSON, and duetime's
        raise ValueError("not duetime's /healthz")
    checks.append(Check("node", "ok", f"{url} answers {health.status_code}"))
    ready = http.get("/readyz")
    if ready.is_success:
        checks.append(Check("store", "ok", "reachable, migrations current"))
    else:
        detail = ready.json().get("detail", ready.text) if ready.content else ready.reason_phrase
        checks.append(Check("store", "fail", f"not ready ({ready.status_code}): {detail}"))
    date = health.headers.get("date")
    if date:
        offset = _offset(email.utils.parsedate_to_datetime(date))
        checks.append(Check("clock", _within(offset), f"node is {offset:+.1f} s from this machine"))
    checks.append(_leader(http, token))
    checks.extend(_queues(http, max_lag))


def _leader(http: httpx.Client, token: str | None) -> Check:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    found = http.get("/metrics", headers=headers)
    if found.status_code == 401:
        return Check(
            "leader", "warn", "unknown: /metrics needs --metrics-token (or the admin token)"
        )
    for line in found.text.splitlines():
        if line.startswith("duetime_is_leader"):
            leading = float(line.rsplit(None, 1)[-1]) >= 1
            return Check(
                "leader", "ok", "this node leads" if leading else "another node leads (or none yet)"
            )
    return Check("leader", "warn", "unknown: /metrics has no duetime_is_leader")


def _queues(http: httpx.Client, max_lag: float) -> list[Check]:
    found = http.get("/v1/queues")
    if not found.is_success:
        return [Check("queues", "warn", f"cannot list queues ({found.status_code})")]
    checks: list[Check] = []
    for queue in found.json().get("items", []):
        lag = queue.get("oldest_due_lag_seconds")
        state = "paused" if queue.get("paused") else "active"
        if lag is None:
            checks.append(Check(f"queue {queue['name']}", "ok", f"{state}, nothing waiting"))
        else:
            status: Status = "ok" if lag <= max_lag or queue.get("paused") else "warn"
            detail = f"{state}, oldest due task waiting {lag:.1f} s"
            checks.append(Check(f"queue {queue['name']}", status, detail))
    return checks or [Check("queues", "ok", "no queue has tasks")]


def store_checks(db: str) -> list[Check]:
    """Checks made directly against the store at ``db``."""
    store_from_url = server_module("duetime.store").store_from_url

    async def run() -> list[Check]:
        store = store_from_url(db)
        try:
            await store.open()
            await store.ping()
        except Exception as exc:  # any failure to reach it is the finding
            return [Check("store (direct)", "fail", f"cannot open {db}: {exc}")]
        try:
            pending = await store.migrations_pending()
            offset = _offset(await store.now())
            waiting = await store.history_pending_rows() if not pending else 0
        finally:
            await store.close()
        return [
            Check(
                "history",
                "warn" if waiting > MAX_HISTORY_PENDING else "ok",
                f"{waiting} statements' audit records wait for the leader to move them"
                if waiting
                else "nothing waiting to be moved",
            ),
            Check(
                "migrations",
                "warn" if pending else "ok",
                f"pending: {', '.join(pending)} (run duetime migrate)" if pending else "current",
            ),
            Check("store clock", _within(offset), f"store is {offset:+.3f} s from this machine"),
        ]

    return asyncio.run(run())


def doctor(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    metrics_token: Annotated[
        str | None,
        typer.Option(envvar="DUETIME_METRICS_TOKEN", help="Token that may read /metrics."),
    ] = None,
    db: DbOption = None,
    max_lag: Annotated[
        float, typer.Option(help="Warn when a queue's oldest due task waits longer (s).")
    ] = 60.0,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Check a deployment: node, store, migrations, clocks, leader, queue lag."""
    with errors_reported():
        check_client_environment()
        api_key = api_key_given(api_key)
    checks = api_checks(server_url(url), api_key, metrics_token, max_lag)
    if db:
        checks.extend(store_checks(db))
    emit(output, {"items": [asdict(c) for c in checks]}, ("check", "status", "detail"))
    if any(c.status == "fail" for c in checks):
        unreachable = checks[0].check == "node" and checks[0].status == "fail"
        raise typer.Exit(EXIT_UNREACHABLE if unreachable else EXIT_ERROR)


__all__ = ["Check", "api_checks", "doctor", "store_checks"]
