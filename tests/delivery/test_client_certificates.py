"""TLS client certificates: stored through the API (the key sealed, never returned) and
presented by webhooks whose target says ``"auth": {"mtls": name}``, against a loopback HTTPS
server that requires one (a CA, server and client certificates made by trustme)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import trustme
from identity_helpers import claim, deliver, real_now_clock, served

from duetime.clock import FakeClock
from duetime.delivery.outbound import OutboundIdentity
from duetime.delivery.webhook import WebhookDeliverer
from duetime.store import Store


@pytest.fixture
def clock() -> FakeClock:
    return real_now_clock()


@dataclass
class MtlsServer:
    url: str
    peers: list[dict[str, Any]] = field(default_factory=list)
    """The client certificate of each request served."""


@contextlib.asynccontextmanager
async def mtls_server(ca: trustme.CA) -> AsyncIterator[MtlsServer]:
    """HTTPS on 127.0.0.1 that requires a client certificate issued by ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    found = MtlsServer("")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            found.peers.append(writer.get_extra_info("peercert"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    found.url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    try:
        yield found
    finally:
        server.close()
        await server.wait_closed()


async def test_a_webhook_presents_the_tenants_client_certificate(
    store: Store, clock: FakeClock
) -> None:
    ca = trustme.CA()
    client_cert = ca.issue_cert("billing.acme.example", common_name="billing.acme.example")

    def trusting() -> ssl.SSLContext:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        return context

    async with served(store, clock) as node, mtls_server(ca) as https:
        acme = await node.tenant()
        chain = "".join(blob.bytes().decode() for blob in client_cert.cert_chain_pems)
        key = client_cert.private_key_pem.bytes().decode()
        put = await node.client.put(
            "/v1/client-certificates/billing",
            json={"certificate": chain, "private_key": key},
            headers=acme,
        )
        assert put.status_code == 201, put.text
        out = put.json()
        assert "billing.acme.example" in out["subject"] and len(out["fingerprint_sha256"]) == 64
        assert "private_key" not in out and "PRIVATE" not in put.text
        listed = await node.client.get("/v1/client-certificates", headers=acme)
        assert [c["name"] for c in listed.json()["items"]] == ["billing"]
        assert "PRIVATE" not in listed.text
        stored = await store.client_certificate_get(acme["id"], "billing")
        assert stored is not None
        assert stored.private_key.startswith("dtenc") and "PRIVATE" not in stored.private_key

        identity = OutboundIdentity(
            store,
            issuer=node.url,
            sealer=lambda: node.app.state.identity._sealer(),
            clock=clock,
            tls_base=trusting,
        )
        deliverer = WebhookDeliverer(
            allow_private=True, identity=identity, ssl_context=trusting(), clock=clock
        )
        try:
            with_cert = {"type": "http", "url": https.url, "auth": {"mtls": "billing"}}
            made = await node.client.post("/v1/tasks", json={"target": with_cert}, headers=acme)
            assert made.status_code == 201, made.text
            outcome = await deliver(deliverer, await claim(store, made.json()["id"]))
            assert outcome.succeeded, outcome.error
            (peer,) = https.peers
            assert (("commonName", "billing.acme.example"),) in peer["subject"]

            # Without the certificate the server refuses the handshake.
            plain = {"type": "http", "url": https.url}
            made = await node.client.post("/v1/tasks", json={"target": plain}, headers=acme)
            outcome = await deliver(deliverer, await claim(store, made.json()["id"]))
            assert not outcome.succeeded and outcome.retryable
            assert len(https.peers) == 1

            # A certificate name the tenant never stored fails without a retry.
            other = {"type": "http", "url": https.url, "auth": {"mtls": "nope"}}
            made = await node.client.post("/v1/tasks", json={"target": other}, headers=acme)
            outcome = await deliver(deliverer, await claim(store, made.json()["id"]))
            assert not outcome.succeeded and not outcome.retryable
            assert "no client certificate 'nope'" in (outcome.error or "")
        finally:
            await deliverer.close()


async def test_a_certificate_is_refused_unless_its_key_belongs_to_it(
    store: Store, clock: FakeClock
) -> None:
    ca = trustme.CA()
    one, two = ca.issue_cert("one.example"), ca.issue_cert("two.example")
    async with served(store, clock) as node:
        acme = await node.tenant()
        chain = one.cert_chain_pems[0].bytes().decode()
        cases = [
            (
                {"certificate": chain, "private_key": two.private_key_pem.bytes().decode()},
                "private_key",
            ),
            ({"certificate": "not pem", "private_key": "x"}, "certificate"),
            ({"certificate": chain, "private_key": "not a key"}, "private_key"),
        ]
        for body, field_name in cases:
            resp = await node.client.put("/v1/client-certificates/c1", json=body, headers=acme)
            assert resp.status_code == 422, resp.text
            assert resp.json()["field"] == field_name, resp.json()
        bad_name = await node.client.put(
            "/v1/client-certificates/bad%20name",
            json={"certificate": chain, "private_key": one.private_key_pem.bytes().decode()},
            headers=acme,
        )
        assert bad_name.status_code == 422
        assert await store.client_certificate_list(acme["id"]) == []
        missing = await node.client.get("/v1/client-certificates/c1", headers=acme)
        assert missing.status_code == 404
        assert (
            await node.client.delete("/v1/client-certificates/c1", headers=acme)
        ).status_code == 404
