"""The private-address guard: webhooks may not reach into the network duetime runs in.

Unless ``DUETIME_ALLOW_PRIVATE_TARGETS=true`` (or dev mode), a webhook may not connect to a
loopback, private (RFC 1918, CGNAT), link-local, unique-local, multicast, unspecified, reserved,
broadcast or cloud-metadata address (SPEC §4). Otherwise any tenant could make duetime fetch
``http://169.254.169.254/`` or poke an internal admin port for them (server-side request forgery).

The check is made on the address actually connected to, not on the URL text:
:class:`GuardedResolver` sits inside aiohttp's connector, so the addresses it returns are the only
ones aiohttp dials, and a name that resolves to a private address (or is re-pointed to one after
``check_url`` passed it: DNS rebinding) is refused before any socket opens. aiohttp does not ask a
resolver about literal IP hosts, so the deliverer checks those itself with :func:`literal_address`.

Addresses that smuggle an IPv4 address inside IPv6 (IPv4-mapped ``::ffff:10.0.0.1``, NAT64
``64:ff9b::10.0.0.1``, 6to4 ``2002:0a00:0001::``, Teredo) are judged by the IPv4 address they
carry, and the legacy IPv4 spellings that ``inet_aton`` accepts (``2130706433``, ``0177.0.0.1``,
``0x7f.1``, ``127.1``) are normalised before anything else looks at them.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from typing import Protocol

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from duetime.errors import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_HINT = "set DUETIME_ALLOW_PRIVATE_TARGETS=true to allow"

_v4 = ipaddress.IPv4Network
_v6 = ipaddress.IPv6Network

# Checked in order; the first match names the reason. Metadata endpoints come before the ranges
# that contain them so the error says what the address really is.
_V4_RULES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_v4("169.254.169.254/32"), "a cloud metadata address"),
    (_v4("169.254.170.2/32"), "a cloud metadata address"),  # AWS ECS task metadata
    (_v4("100.100.100.200/32"), "a cloud metadata address"),  # Alibaba Cloud
    (_v4("192.0.0.192/32"), "a cloud metadata address"),  # Oracle Cloud
    (_v4("0.0.0.0/8"), "unspecified"),
    (_v4("10.0.0.0/8"), "private"),
    (_v4("100.64.0.0/10"), "private (shared CGNAT space)"),
    (_v4("127.0.0.0/8"), "loopback"),
    (_v4("169.254.0.0/16"), "link-local"),
    (_v4("172.16.0.0/12"), "private"),
    (_v4("192.0.0.0/24"), "reserved"),
    (_v4("192.0.2.0/24"), "reserved (documentation)"),
    (_v4("192.88.99.0/24"), "reserved"),
    (_v4("192.168.0.0/16"), "private"),
    (_v4("198.18.0.0/15"), "reserved (benchmarking)"),
    (_v4("198.51.100.0/24"), "reserved (documentation)"),
    (_v4("203.0.113.0/24"), "reserved (documentation)"),
    (_v4("224.0.0.0/4"), "multicast"),
    (_v4("255.255.255.255/32"), "broadcast"),
    (_v4("240.0.0.0/4"), "reserved"),
)

_V6_RULES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_v6("fd00:ec2::254/128"), "a cloud metadata address"),  # AWS IMDS over IPv6
    (_v6("fd00:ec2::23/128"), "a cloud metadata address"),  # AWS DNS / time over IPv6
    (_v6("::/128"), "unspecified"),
    (_v6("::1/128"), "loopback"),
    (_v6("64:ff9b:1::/48"), "private (local-use NAT64)"),
    (_v6("100::/64"), "reserved (discard-only)"),
    (_v6("2001:db8::/32"), "reserved (documentation)"),
    (_v6("2001::/23"), "reserved"),
    (_v6("3fff::/20"), "reserved (documentation)"),
    (_v6("fc00::/7"), "unique-local"),
    (_v6("fe80::/10"), "link-local"),
    (_v6("fec0::/10"), "private (site-local)"),
    (_v6("ff00::/8"), "multicast"),
)
_GLOBAL_UNICAST_V6 = _v6("2000::/3")
_DEC = frozenset("0123456789")
_OCT = frozenset("01234567")
_HEX = frozenset("0123456789abcdef")
_NAT64 = _v6("64:ff9b::/96")


class ForbiddenAddressError(OSError):
    """A connection was refused because its address is not public (and private is not allowed).

    An :class:`OSError` so that aiohttp's connector wraps it like any other resolution failure;
    the deliverer recognises it and fails the attempt without a retry.
    """

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"target address {address} is {reason}; {ALLOW_HINT}")
        self.address = address
        self.reason = reason


def _check_v4(ip: ipaddress.IPv4Address) -> str | None:
    for network, reason in _V4_RULES:
        if ip in network:
            return reason
    return None


def _embedded(reason: str | None, how: str) -> str | None:
    return None if reason is None else f"{reason} ({how})"


def is_forbidden_address(ip: str | IPAddress) -> str | None:
    """Why a webhook may not connect to ``ip``, or ``None`` when it is a public address.

    The reason reads after "is": ``"private"``, ``"loopback"``, ``"a cloud metadata address"``,
    ``"private (IPv4-mapped)"``... A string that is not an IP address is forbidden too.
    """
    if isinstance(ip, str):
        parsed = parse_ip(ip)
        if parsed is None:
            return "not an IP address"
        ip = parsed
    if isinstance(ip, ipaddress.IPv4Address):
        return _check_v4(ip)
    if ip.scope_id:
        return "link-local (scoped)"
    mapped = ip.ipv4_mapped
    if mapped is not None:
        return _embedded(_check_v4(mapped), "IPv4-mapped")
    teredo = ip.teredo
    if teredo is not None:
        server, client = teredo
        return _embedded(_check_v4(client), "Teredo client") or _embedded(
            _check_v4(server), "Teredo server"
        )
    if ip in _NAT64:
        return _embedded(_check_v4(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)), "NAT64")
    for network, reason in _V6_RULES:
        if ip in network:
            return reason
    sixtofour = ip.sixtofour
    if sixtofour is not None:
        return _embedded(_check_v4(sixtofour), "6to4")
    if ip not in _GLOBAL_UNICAST_V6:
        # Everything else outside 2000::/3 is unassigned or special-purpose (IPv4-compatible
        # ::a.b.c.d included).
        return "reserved"
    return None


def parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read the way ``inet_aton`` reads it, or ``None`` when it is not such a number.

    One to four dot-separated parts, each decimal, octal (leading ``0``) or hex (``0x``); the last
    part fills the remaining bytes: ``2130706433``, ``0177.0.0.1``, ``0x7f.1`` and ``127.1`` are all
    ``127.0.0.1``. A single trailing dot is ignored.
    """
    text = host[:-1] if host.endswith(".") else host
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        lower = part.lower()
        if lower.startswith("0x"):
            digits, base, allowed = lower[2:], 16, _HEX
        elif len(lower) > 1 and lower.startswith("0"):
            digits, base, allowed = lower[1:], 8, _OCT
        else:
            digits, base, allowed = lower, 10, _DEC
        if not lower or not allowed.issuperset(digits):
            return None
        # int() alone would accept "+1", " 1" and "1_0"; the digit check above does not.
        values.append(int(digits, base) if digits else 0)
    *head, last = values
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    number = number << (8 * (4 - len(head))) | last
    return ipaddress.IPv4Address(number)


def parse_ip(host: str) -> IPAddress | None:
    """``host`` as an IP address (brackets, IPv6 zones, legacy IPv4 forms allowed), or ``None``."""
    text = host.strip("[]") if host.startswith("[") else host
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    return parse_legacy_ipv4(text)


def literal_address(host: str) -> IPAddress | None:
    """The IP address a URL host names literally, or ``None`` when it is a DNS name."""
    return parse_ip(host)


def looks_like_ip(host: str) -> bool:
    """Whether aiohttp would dial ``host`` as an address without asking a resolver (so an
    address that :func:`literal_address` cannot read must be refused, not treated as a name)."""
    return ":" in host or host.rstrip(".").replace(".", "").isdigit()


def _is_localhost_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def check_url(
    url: str,
    *,
    allow_private: bool = False,
    field: str = "target.url",
    schemes: tuple[str, ...] = ("http", "https"),
) -> None:
    """Refuse, at task-create time, a webhook (or broker) URL that can never be delivered to.

    Raises :class:`~duetime.errors.ValidationError` (naming ``field``) when the scheme is not
    one of ``schemes`` (``http``/``https`` for webhooks), the host is missing or looks like an
    IP address but is not one, or
    (unless ``allow_private``) the host is a literal non-public IP address or a ``localhost``
    name. DNS names are not resolved here: a name is checked on its resolved address at every
    delivery.
    """
    if not url or any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ValidationError("url must be a non-empty URL without whitespace", field)
    try:
        parsed = URL(url)
        port = parsed.port
    except (ValueError, TypeError) as exc:
        raise ValidationError(f"url is not a valid URL: {exc}", field) from exc
    if parsed.scheme not in schemes:
        raise ValidationError(f"url scheme must be {' or '.join(schemes)}", field)
    host = parsed.raw_host
    if not host:
        raise ValidationError("url must name a host", field)
    if port is not None and not 0 < port < 65536:
        raise ValidationError("url port must be between 1 and 65535", field)
    ip = literal_address(host)
    if ip is None and looks_like_ip(host):
        raise ValidationError(f"url host {host} is not a valid IP address", field)
    if allow_private:
        return
    if ip is not None:
        reason = is_forbidden_address(ip)
        if reason is not None:
            raise ValidationError(f"target address {ip} is {reason}; {ALLOW_HINT}", field)
    elif _is_localhost_name(host):
        raise ValidationError(f"target host {host} is loopback; {ALLOW_HINT}", field)


class Resolver(Protocol):
    """What the deliverer needs from DNS (aiohttp's resolvers fit). Fakes implement it in tests."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]: ...

    async def close(self) -> None: ...


def resolve_result(hostname: str, address: IPAddress, port: int) -> ResolveResult:
    """A :class:`ResolveResult` for one numeric address (flags say: already numeric)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return ResolveResult(
        hostname=hostname,
        host=str(address),
        port=port,
        family=family,
        proto=0,
        flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
    )


class GuardedResolver(AbstractResolver):
    """Resolves through ``inner`` and keeps only the addresses a webhook may connect to.

    Public addresses of a name that also has private ones are kept (only they will be dialled);
    a name with no public address raises :class:`ForbiddenAddressError`. With ``allow_private``
    every address passes. Legacy numeric IPv4 hosts are answered without asking ``inner``.
    """

    def __init__(self, inner: Resolver, *, allow_private: bool) -> None:
        self._inner = inner
        self._allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        literal = parse_legacy_ipv4(host) if host[:1].isdigit() else None
        if literal is not None:
            results = [resolve_result(host, literal, port)]
        else:
            results = await self._inner.resolve(host, port, family)
        if self._allow_private:
            return results
        allowed: list[ResolveResult] = []
        refused: tuple[str, str] | None = None
        for result in results:
            reason = is_forbidden_address(result["host"])
            if reason is None:
                allowed.append(result)
            elif refused is None:
                refused = (result["host"], reason)
        if not allowed:
            if refused is None:
                raise OSError(f"{host} did not resolve to any address")
            raise ForbiddenAddressError(*refused)
        return allowed

    async def close(self) -> None:
        await self._inner.close()


class StaticResolver:
    """A resolver answering from a fixed table (name -> addresses); for tests and benchmarks.

    Unknown names fail the way a real lookup does (:class:`socket.gaierror`).
    """

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._table = {name.lower(): tuple(addresses) for name, addresses in table.items()}
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        addresses = self._table.get(host.lower().rstrip("."))
        if addresses is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: name not known")
        out: list[ResolveResult] = []
        for text in addresses:
            address = ipaddress.ip_address(text)
            wanted = family in (socket.AF_UNSPEC, 0) or (
                (family == socket.AF_INET6) == (address.version == 6)
            )
            if wanted:
                out.append(resolve_result(host, address, port))
        return out

    async def close(self) -> None:
        return None
