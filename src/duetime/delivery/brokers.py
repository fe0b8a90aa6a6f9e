"""What the three message-broker deliverers (AMQP, NATS, Redis) share.

Each broker deliverer is a :class:`BrokerDeliverer`: one :class:`Link` per (tenant, broker URL)
on this node holds one connection and batches the messages that are due together, so a burst goes
out as a few batches, each waiting for one round of broker confirms, not one round trip per task.
A subclass only says how to connect and how to publish one batch; this module decides what an
outcome means:

* every message the broker confirmed is ``succeeded``; one it refused, returned as unroutable or
  did not confirm is a failed attempt, retryable, whose error is the broker's own text;
* a connection that fails (down, refused, killed, timed out) fails every message of the batch
  not yet confirmed, as retryable attempts, and is dropped, so the next batch dials again:
  connections recover by themselves;
* a broker host is dialled only after the private-address guard
  (:mod:`duetime.delivery.netguard`) passed the address it resolved to, exactly as for webhooks,
  and the connection is made to that checked address (so a name re-pointed to a private address
  later is caught at the next connect, not followed);
* a broker URL's credentials (its password or token, a Redis ``?password=``) are stored sealed
  and opened right before the connection is made (:mod:`duetime.delivery.sealing`); they never
  appear in an outcome's error, and the API shows them as ``***`` and a fingerprint
  (:mod:`duetime.delivery.redact`);
* a broker URL's query takes only the parameters its type documents
  (:func:`check_broker_url`'s ``params``): anything else is refused at create time, so no
  parameter reaches a client library that would read local files or change how it connects.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp.resolver import DefaultResolver
from yarl import URL

from duetime.clock import Clock, SystemClock
from duetime.delivery.base import Delivery, Outcome
from duetime.delivery.headers import HEADER_IDEMPOTENCY_KEY, SigningError, message_headers
from duetime.delivery.netguard import (
    ForbiddenAddressError,
    GuardedResolver,
    Resolver,
    check_url,
    is_forbidden_address,
    literal_address,
)
from duetime.delivery.redact import scrub
from duetime.delivery.sealing import SealError, TargetSealer
from duetime.errors import ConfigError, ValidationError
from duetime.types import AttemptOutcome

__all__ = [
    "BrokerDeliverer",
    "BrokerError",
    "Message",
    "Refused",
    "any_text",
    "check_broker_url",
    "send_error",
    "small_count",
]

_ERROR_LIMIT = 300
_MAX_OPENED = 4096
"""Opened broker URLs kept in memory per deliverer (the sealed text is the key)."""


class Refused(Exception):
    """This message can never be delivered as its target says: fail the task without a retry."""


class BrokerError(Exception):
    """The broker did not take this message (refused, returned, not confirmed): retryable."""


def any_text(value: str) -> bool:
    """A query value check: any text."""
    return True


def small_count(value: str) -> bool:
    """A query value check: a whole number from 0 to 999,999,999."""
    return value.isascii() and value.isdigit() and len(value) <= 9


def check_broker_url(
    url: object,
    *,
    schemes: tuple[str, ...],
    allow_private: bool,
    params: Mapping[str, Callable[[str], bool]],
    field: str = "target.url",
) -> URL:
    """Refuse, at create time, a broker URL the deliverer could never use; the parsed URL.

    The same rules as a webhook URL (:func:`duetime.delivery.netguard.check_url`): the scheme is
    one of ``schemes``, a host is named, and unless ``allow_private`` a literal non-public address
    or a ``localhost`` name is refused. Its query may hold only the names in ``params``, each
    once, with a value its check accepts. Raises :class:`~duetime.errors.ValidationError`
    naming the field and the parameter.
    """
    if not isinstance(url, str):
        raise ValidationError("url is required and must be a string", field)
    check_url(url, allow_private=allow_private, field=field, schemes=schemes)
    parsed = URL(url)
    allowed = ", ".join(sorted(params)) or "none"
    seen: set[str] = set()
    for name, value in parsed.query.items():
        check = params.get(name)
        if check is None:
            raise ValidationError(
                f"query parameter {name!r} is not one duetime passes on for this broker "
                f"(it takes: {allowed})",
                field,
            )
        if name in seen:
            raise ValidationError(f"query parameter {name!r} is given twice", field)
        seen.add(name)
        if not check(value):
            raise ValidationError(f"query parameter {name!r} has a value it cannot take", field)
    return parsed


@dataclass(slots=True)
class Message:
    """One message on its way to a broker. ``target`` is the subclass's parsed target."""

    delivery: Delivery
    target: Any
    body: bytes
    headers: dict[str, str]
    future: asyncio.Future[None] = field(repr=False)

    def settle(self, error: BaseException | None) -> None:
        """Report this message confirmed (``None``) or not (the error); later calls are no-ops.
        Settling each message as its confirm arrives frees its dispatcher slot at once."""
        _settle(self.future, error)

    @property
    def key(self) -> str:
        """The message id brokers deduplicate on: the idempotency key, or the task id."""
        return self.headers[HEADER_IDEMPOTENCY_KEY]


C = TypeVar("C")


class Link(Generic[C]):
    """One (tenant, broker URL) on this node: a connection, and the messages waiting for it.

    Messages submitted in the same event-loop turn go out together; up to ``parallel`` batches
    are in flight at once (the next batch is sent while the previous one waits for confirms).
    """

    def __init__(self, owner: BrokerDeliverer[C], url: str) -> None:
        self.owner = owner
        self.url = url
        self.conn: C | None = None
        self._connecting = asyncio.Lock()
        self._pending: list[Message] = []
        self._running = 0
        self._kicked = False
        self._jobs: set[asyncio.Task[None]] = set()

    @property
    def idle(self) -> bool:
        """Nothing waiting and no batch in flight: it may be closed without failing anything."""
        return not self._pending and self._running == 0

    def submit(self, message: Message) -> None:
        self._pending.append(message)
        if not self._kicked:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._kick)

    def _kick(self) -> None:
        self._kicked = False
        owner = self.owner
        while self._pending and self._running < owner.parallel:
            batch = self._pending[: owner.max_batch]
            del self._pending[: owner.max_batch]
            self._running += 1
            job = asyncio.create_task(self._send(batch))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _send(self, batch: list[Message]) -> None:
        live = [m for m in batch if not m.future.done()]  # timed out while waiting: skip
        try:
            if live:
                await self._send_live(live)
        except asyncio.CancelledError:  # the deliverer is closing: nobody waits in vain
            for m in live:
                m.settle(BrokerError("deliverer is closed"))
            raise
        finally:
            self._running -= 1
            if self._pending:
                self._kick()

    async def _send_live(self, batch: list[Message]) -> None:
        owner = self.owner
        limit = max(m.delivery.task.timeout_seconds for m in batch)
        try:
            async with asyncio.timeout(limit):
                conn = await self._connect()
                await owner.publish(conn, batch)
        except Exception as exc:  # the connection (or the batch as a whole) failed
            await self.reset()
            if isinstance(exc, ForbiddenAddressError):
                exc = Refused(str(exc))
            elif isinstance(exc, TimeoutError):
                exc = BrokerError(f"{owner.kind} broker did not answer within {limit:g}s")
            for m in batch:
                _settle(m.future, exc)
            return
        for m in batch:  # a publish that forgot one must not leave its task waiting
            m.settle(BrokerError(f"{owner.kind}: the broker did not confirm the message"))

    async def _connect(self) -> C:
        conn = self.conn
        if conn is not None and self.owner.is_open(conn):
            return conn
        async with self._connecting:
            conn = self.conn
            if conn is not None and self.owner.is_open(conn):
                return conn
            if conn is not None:
                self.conn = None
                await self.owner.disconnect(conn)
            host = await self.owner.dial_host(URL(self.url))
            self.conn = conn = await self.owner.connect(self.url, host)
            return conn

    async def reset(self) -> None:
        """Drop the connection; the next batch dials again."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self.owner.disconnect(conn)

    async def close(self) -> None:
        for job in list(self._jobs):
            job.cancel()
        for m in self._pending:
            _settle(m.future, BrokerError("deliverer is closed"))
        self._pending.clear()
        await self.reset()


def send_error(future: asyncio.Future[Any]) -> BaseException | None:
    """The error of a finished publish future; a cancelled one (its connection closed before
    the broker answered) is a :class:`BrokerError`."""
    if future.cancelled():
        return BrokerError("connection closed before the broker confirmed the message")
    return future.exception()


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def _settle(future: asyncio.Future[None], result: BaseException | None) -> None:
    if future.done():
        return
    if result is None:
        future.set_result(None)
    else:
        future.set_exception(result)


class BrokerDeliverer(Generic[C]):
    """The delivery logic shared by the broker deliverers; subclasses connect and publish.

    ``allow_private`` lifts the private-address guard (``DUETIME_ALLOW_PRIVATE_TARGETS`` or dev
    mode). ``resolver`` replaces DNS (tests inject one); its answers pass the guard before any
    socket opens. ``clock`` supplies ``webhook-timestamp``. ``max_batch`` bounds one batch;
    ``parallel`` how many batches per link are in flight at once; ``max_links`` how many
    (tenant, broker URL) connections stay open (the least recently used idle one closes first).
    """

    kind = "broker"
    default_parallel = 32
    """Batches in flight per link. Dispatcher deliveries arrive over several event-loop turns,
    so batches are often smaller than the dispatcher's slots; the dispatcher's concurrency, not
    this, should bound the messages waiting for confirms."""
    schemes: tuple[str, ...] = ()
    tls_schemes: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
        clock: Clock | None = None,
        max_batch: int = 500,
        parallel: int | None = None,
        max_links: int = 256,
        sealer: TargetSealer | None = None,
    ) -> None:
        self.allow_private = allow_private
        self._sealer = sealer
        self._opened: dict[tuple[str, str], str] = {}
        self.max_batch = max_batch
        self.parallel = parallel or self.default_parallel
        self.max_links = max_links
        self._resolver = resolver
        self._guard: GuardedResolver | None = None
        self._clock: Clock = clock or SystemClock()
        self._links: dict[tuple[str, str], Link[C]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # -- what a subclass provides ---------------------------------------------------------------

    def parse_target(self, target: Mapping[str, Any]) -> Any:
        """The target in the form :meth:`publish` wants; raises :class:`Refused` if unusable."""
        raise NotImplementedError

    async def connect(self, url: str, host: str) -> C:
        """A new connection to the broker of ``url``, dialling ``host`` (the checked address,
        or the name itself for TLS, whose certificate names it)."""
        raise NotImplementedError

    def is_open(self, conn: C) -> bool:
        raise NotImplementedError

    async def disconnect(self, conn: C) -> None:
        raise NotImplementedError

    async def publish(self, conn: C, batch: Sequence[Message]) -> None:
        """Publish ``batch``, :meth:`Message.settle` each message as the broker confirms or
        refuses it, and return once every message is settled. Raises when the connection failed
        (the link is then dropped and the unsettled messages fail, retryable)."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------

    async def dial_host(self, url: URL) -> str:
        """The host to dial for ``url`` after the private-address guard checked where it leads.

        Raises :class:`ForbiddenAddressError` for a forbidden address (before any socket opens)
        and :class:`OSError` when the name does not resolve.
        """
        host = url.raw_host or ""
        ip = literal_address(host)
        if ip is not None:
            if not self.allow_private:
                reason = is_forbidden_address(ip)
                if reason is not None:
                    raise ForbiddenAddressError(str(ip), reason)
            return str(ip)
        guard = self._guard
        if guard is None:
            inner = self._resolver if self._resolver is not None else DefaultResolver()
            guard = self._guard = GuardedResolver(inner, allow_private=self.allow_private)
        answers = await guard.resolve(host, url.port or 0)
        if url.scheme in self.tls_schemes:
            # The certificate names the host: dial the name (its answers were just checked).
            return host
        return str(answers[0]["host"])

    def open_url(self, url: str, tenant_id: str) -> str:
        """``url`` with its sealed credentials opened (:mod:`duetime.delivery.sealing`); each
        sealed URL is opened once, then found in memory (a burst to one broker opens it once)."""
        if "dtenc" not in url or self._sealer is None:
            return url
        key = (tenant_id, url)
        opened = self._opened.get(key)
        if opened is None:
            opened = self._sealer.open_url(url, tenant_id)
            if len(self._opened) >= _MAX_OPENED:
                self._opened.clear()
            self._opened[key] = opened
        return opened

    async def deliver(self, delivery: Delivery) -> Outcome:
        """Publish the task's payload once and wait for the broker's confirm. Never raises."""
        try:
            task = delivery.task
            url = self.open_url(str(task.target.get("url", "")), task.tenant_id)
        except (SealError, ConfigError, ValueError) as exc:  # another node's key: try again there
            return Outcome(AttemptOutcome.FAILED, retryable=True, error=f"{self.kind}: {exc}")
        try:
            return await self._deliver(delivery, url)
        except (Refused, SigningError) as exc:
            error = _short(scrub(str(exc), url))
            return Outcome(AttemptOutcome.FAILED, retryable=False, error=error)
        except TimeoutError:
            return Outcome(
                AttemptOutcome.TIMED_OUT,
                retryable=True,
                error=f"{self.kind} broker did not confirm within "
                f"{delivery.task.timeout_seconds:g}s",
            )
        except Exception as exc:
            text = str(exc) or type(exc).__name__
            if not isinstance(exc, BrokerError):
                text = f"{self.kind}: {type(exc).__name__}: {text}"
            return Outcome(AttemptOutcome.FAILED, retryable=True, error=_short(scrub(text, url)))

    async def _deliver(self, delivery: Delivery, url: str) -> Outcome:
        if self._closed:
            raise BrokerError("deliverer is closed")
        task = delivery.task
        parsed = self.parse_target(task.target)
        body = delivery.body()
        headers = message_headers(delivery, body, int(self._clock.now().timestamp()))
        key = (task.tenant_id, url)
        link = self._links.pop(key, None)
        if link is None:
            link = Link(self, url)
            if len(self._links) >= self.max_links:
                self._evict()
        self._links[key] = link  # re-inserted: the dict's order is least recently used first
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        # A timer that fails the future itself (cheaper than a timeout scope and a shield per
        # message): a message that expires before its batch goes out is skipped.
        timer = loop.call_later(task.timeout_seconds, _expire, future)
        link.submit(Message(delivery, parsed, body, headers, future))
        try:
            await future
        finally:
            timer.cancel()
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False)

    def _evict(self) -> None:
        """Close the least recently used idle connections, keeping at most ``max_links`` - 1
        (so many tenants or broker URLs cannot pile up open connections on a node)."""
        excess = len(self._links) - self.max_links + 1
        for key in [k for k, link in self._links.items() if link.idle][:excess]:
            job = asyncio.create_task(self._links.pop(key).close())
            self._closing.add(job)
            job.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every connection. Idempotent; later deliveries fail (retryable)."""
        self._closed = True
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.close()
        if self._closing:
            await asyncio.wait(set(self._closing))
        guard, self._guard = self._guard, None
        if guard is not None:
            await guard.close()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_LIMIT else text[: _ERROR_LIMIT - 1] + "…"
