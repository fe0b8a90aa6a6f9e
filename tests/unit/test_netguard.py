"""The private-address guard, without touching the network: address rules, legacy IPv4 spellings,
create-time URL checks, and the resolver wrapper fed by a static table."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.delivery.netguard import (
    ForbiddenAddressError,
    GuardedResolver,
    StaticResolver,
    check_url,
    is_forbidden_address,
    parse_ip,
    parse_legacy_ipv4,
)
from duetime.errors import ValidationError


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private (shared CGNAT space)"),
        ("100.127.255.255", "private (shared CGNAT space)"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "a cloud metadata address"),
        ("169.254.170.2", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "reserved (documentation)"),
        ("198.18.0.1", "reserved (benchmarking)"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("fc00::1", "unique-local"),
        ("fd12:3456::1", "unique-local"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("ff02::1", "multicast"),
        ("fec0::1", "private (site-local)"),
        ("2001:db8::1", "reserved (documentation)"),
        ("100::1", "reserved (discard-only)"),
        ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible form
        ("::ffff:10.0.0.1", "private (IPv4-mapped)"),
        ("::ffff:127.0.0.1", "loopback (IPv4-mapped)"),
        ("::ffff:169.254.169.254", "a cloud metadata address (IPv4-mapped)"),
        ("64:ff9b::10.0.0.1", "private (NAT64)"),
        ("64:ff9b::7f00:1", "loopback (NAT64)"),
        ("64:ff9b:1::1", "private (local-use NAT64)"),
        ("2002:0a00:0001::1", "private (6to4)"),
        ("2002:7f00:0001::", "loopback (6to4)"),
        ("2002:a9fe:a9fe::1", "a cloud metadata address (6to4)"),
        # Teredo: the client address is stored inverted (~10.0.0.1 = f5ff:fffe).
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private (Teredo client)"),
        ("2001:0:0a00:0001:8000:63bf:f7f7:f7f7", "private (Teredo server)"),
        ("4000::1", "reserved"),
        ("not-an-ip", "not an IP address"),
    ],
)
def test_forbidden_addresses_say_why(address: str, reason: str) -> None:
    assert is_forbidden_address(address) == reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "172.32.0.1",  # just outside 172.16/12
        "100.128.0.1",  # just outside 100.64/10
        "169.255.0.1",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::8.8.8.8",
        "2002:0808:0808::1",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo with public server and client
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert is_forbidden_address(address) is None
    assert is_forbidden_address(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0X7F.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0xa.0x0.0x0.0x5", "10.0.0.5"),
        ("167772165", "10.0.0.5"),
        ("10.0.0.5.", "10.0.0.5"),
        ("1.256", "1.0.1.0"),
        ("0xffffffff", "255.255.255.255"),
        ("8.8.8.8", "8.8.8.8"),
    ],
)
def test_legacy_ipv4_spellings_are_normalised(host: str, expected: str) -> None:
    assert str(parse_legacy_ipv4(host)) == expected


@pytest.mark.parametrize(
    "host",
    ["example.com", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "4294967296", "08", "1_0", "+1",
     " 1", "1..2", "", ".", "0x1g", "1e3", "١٢٧.0.0.1", "127.0.0.1.example"],
)  # fmt: skip
def test_non_numbers_are_not_ipv4(host: str) -> None:
    assert parse_legacy_ipv4(host) is None


def _inet_aton(text: str) -> str | None:
    try:
        return socket.inet_ntoa(socket.inet_aton(text))
    except OSError:
        return None


_part = st.one_of(
    st.integers(0, 2**32).map(str),
    st.integers(0, 2**32).map(lambda n: f"0{n:o}"),
    st.integers(0, 2**32).map(lambda n: f"0x{n:x}"),
    st.text("0123456789abcdefxX", min_size=1, max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_part, min_size=1, max_size=5).map(".".join))
def test_legacy_parse_agrees_with_inet_aton(host: str) -> None:
    """Whatever the C library would read as an address, we read as the same address."""
    ours = parse_legacy_ipv4(host)
    theirs = _inet_aton(host)
    if theirs is not None:
        assert str(ours) == theirs
    if ours is None:
        assert theirs is None


def test_parse_ip_reads_brackets_and_v6() -> None:
    assert parse_ip("[::1]") == ipaddress.ip_address("::1")
    assert parse_ip("::ffff:a00:1") == ipaddress.ip_address("::ffff:10.0.0.1")
    assert parse_ip("example.com") is None
    assert parse_ip("[nonsense:::]") is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "scheme must be http or https"),
        ("example.com/hook", "scheme must be http or https"),
        ("http:///path", "must name a host"),
        ("https://exa mple.com/", "without whitespace"),
        ("", "non-empty"),
        ("http://example.com:99999/", "not a valid URL"),
        ("http://10.0.0.1/hook", "target address 10.0.0.1 is private; set "
         "DUETIME_ALLOW_PRIVATE_TARGETS=true to allow"),
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://2130706433/", "target address 127.0.0.1 is loopback"),
        ("http://0177.0.0.1/", "127.0.0.1 is loopback"),
        ("http://0x7f.1/", "127.0.0.1 is loopback"),
        ("http://127.1/", "127.0.0.1 is loopback"),
        ("http://[::1]:9000/", "::1 is loopback"),
        ("http://[::ffff:10.0.0.1]/", "private (IPv4-mapped)"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address"),
        ("http://localhost:8080/", "localhost is loopback"),
        ("http://api.localhost/", "loopback"),
        ("http://08/", "url host 08 is not a valid IP address"),
        ("http://4294967296/", "not a valid IP address"),
    ],
)  # fmt: skip
def test_check_url_refuses(url: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_url(url)
    assert message in info.value.detail
    assert info.value.field == "target.url"


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://example.com:8080/a?b=c", "https://user:pw@example.com/",
     "http://8.8.8.8/", "http://[2001:4860:4860::8888]/", "https://xn--bcher-kva.example/"],
)  # fmt: skip
def test_check_url_accepts_public_targets(url: str) -> None:
    check_url(url)


def test_check_url_allows_private_when_told() -> None:
    for url in (
        "http://10.0.0.1/",
        "http://127.0.0.1:8080/",
        "http://localhost/",
        "http://0x7f.1/",
    ):
        check_url(url, allow_private=True)
    with pytest.raises(ValidationError):
        check_url("ftp://10.0.0.1/", allow_private=True)


async def test_guarded_resolver_refuses_a_private_answer() -> None:
    table = StaticResolver({"internal.example": ["10.0.0.5"]})
    guard = GuardedResolver(table, allow_private=False)
    with pytest.raises(ForbiddenAddressError) as info:
        await guard.resolve("internal.example", 443, socket.AF_UNSPEC)
    assert str(info.value) == (
        "target address 10.0.0.5 is private; set DUETIME_ALLOW_PRIVATE_TARGETS=true to allow"
    )
    assert table.lookups == ["internal.example"]


async def test_guarded_resolver_keeps_only_public_answers() -> None:
    """A name pointing at both a public and a private address is dialled only on the public one
    (a rebinding name cannot sneak the private address in next to a public one)."""
    table = StaticResolver({"mixed.example": ["10.0.0.5", "93.184.216.34", "::1"]})
    guard = GuardedResolver(table, allow_private=False)
    results = await guard.resolve("mixed.example", 80, socket.AF_UNSPEC)
    assert [r["host"] for r in results] == ["93.184.216.34"]
    assert results[0]["port"] == 80


async def test_guarded_resolver_passes_everything_when_private_is_allowed() -> None:
    table = StaticResolver({"mixed.example": ["10.0.0.5", "::1"]})
    guard = GuardedResolver(table, allow_private=True)
    results = await guard.resolve("mixed.example", 80, socket.AF_UNSPEC)
    assert [r["host"] for r in results] == ["10.0.0.5", "::1"]


async def test_guarded_resolver_answers_legacy_numbers_itself() -> None:
    table = StaticResolver({})
    allowing = GuardedResolver(table, allow_private=True)
    results = await allowing.resolve("0x7f.1", 8080, socket.AF_UNSPEC)
    assert [(r["host"], r["port"], r["family"]) for r in results] == [
        ("127.0.0.1", 8080, socket.AF_INET)
    ]
    refusing = GuardedResolver(table, allow_private=False)
    with pytest.raises(ForbiddenAddressError, match=r"127\.0\.0\.1 is loopback"):
        await refusing.resolve("2130706433", 80, socket.AF_UNSPEC)
    assert table.lookups == []


async def test_unknown_names_fail_like_dns() -> None:
    guard = GuardedResolver(StaticResolver({}), allow_private=False)
    with pytest.raises(socket.gaierror):
        await guard.resolve("nowhere.example", 80, socket.AF_UNSPEC)
