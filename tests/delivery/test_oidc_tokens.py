"""OIDC ID tokens: a webhook whose target says ``"auth": {"oidc": ...}`` carries a JWT that a
standard library (PyJWT) verifies against the key set the running app publishes; keys rotate
with the new one published before it signs and the old one until its tokens expired."""

from __future__ import annotations

from typing import Any

import httpx
import jwt
import pytest
from identity_helpers import ADMIN, claim, deliver, real_now_clock, receiver, served

from duetime.clock import FakeClock
from duetime.delivery.identity import CLOCK_SKEW_SECONDS, TOKEN_SECONDS
from duetime.delivery.outbound import OutboundIdentity
from duetime.delivery.webhook import WebhookDeliverer
from duetime.store import Store


@pytest.fixture
def clock() -> FakeClock:
    return real_now_clock()


async def _jwks(client: httpx.AsyncClient) -> dict[str, Any]:
    resp = await client.get("/.well-known/jwks.json")  # no auth
    assert resp.status_code == 200, resp.text
    assert "max-age" in resp.headers["cache-control"]
    return dict(resp.json())


def _verify(token: str, jwks: dict[str, Any], audience: str, issuer: str) -> dict[str, Any]:
    kid = jwt.get_unverified_header(token)["kid"]
    key = jwt.PyJWKSet.from_dict(jwks)[kid]
    return dict(jwt.decode(token, key, algorithms=["ES256"], audience=audience, issuer=issuer))


async def test_a_webhook_presents_an_id_token_verified_against_the_published_keys(
    store: Store, clock: FakeClock
) -> None:
    async with served(store, clock) as node, receiver() as hook:
        acme = await node.tenant()
        identity = OutboundIdentity.from_settings(store, node.settings, clock)
        deliverer = WebhookDeliverer(allow_private=True, identity=identity, clock=clock)
        tasks = {}
        for label, auth in (
            ("default", {"oidc": {}}),
            ("given", {"oidc": {"audience": "https://api.example.com", "service_account": "jobs"}}),
        ):
            target = {"type": "http", "url": hook.url, "auth": auth}
            made = await node.client.post("/v1/tasks", json={"target": target}, headers=acme)
            assert made.status_code == 201, made.text
            assert made.json()["target"]["auth"] == auth
            lease = await claim(store, made.json()["id"])
            assert (await deliver(deliverer, lease)).succeeded
            tasks[label] = made.json()["id"]
        await deliverer.close()

        jwks = await _jwks(node.client)
        (first, _), (second, _) = hook.seen
        token = first["authorization"].removeprefix("Bearer ")
        claims = _verify(token, jwks, audience=hook.url, issuer=node.url)
        assert claims["sub"] == acme["id"] and claims["duetime_tenant"] == acme["id"]
        assert claims["exp"] - claims["iat"] == TOKEN_SECONDS
        token = second["authorization"].removeprefix("Bearer ")
        claims = _verify(token, jwks, audience="https://api.example.com", issuer=node.url)
        assert claims["sub"] == f"{acme['id']}/jobs"  # a tenant never speaks as another
        with pytest.raises(jwt.InvalidAudienceError):
            _verify(token, jwks, audience=hook.url, issuer=node.url)

        # The private key is sealed in the store; the published key set holds public keys only.
        (stored,) = await store.signing_key_list()
        assert stored.private_key.startswith("dtenc") and "PRIVATE" not in stored.private_key
        assert all("d" not in key for key in jwks["keys"])
        discovery = (await node.client.get("/.well-known/openid-configuration")).json()
        assert discovery["issuer"] == node.url
        assert discovery["jwks_uri"] == f"{node.url}/.well-known/jwks.json"


async def test_rotation_publishes_a_key_before_it_signs_and_keeps_the_old_until_expiry(
    store: Store, clock: FakeClock
) -> None:
    async with served(store, clock, oidc_key_publish_seconds=600) as node:
        identity: OutboundIdentity = node.app.state.identity
        keys = identity.keys

        async def signer() -> str:
            token = await keys.id_token(issuer=node.url, audience="a", subject="s", tenant_id="t")
            return str(jwt.get_unverified_header(token)["kid"])

        async def published() -> list[str]:
            keys._read_at = None  # as another process would see the store now
            return [k["kid"] for k in (await _jwks(node.client))["keys"]]

        old = await signer()
        assert await published() == [old]
        new = (await keys.rotate()).kid
        assert new != old
        assert await published() == [old, new]  # published at once...
        assert await signer() == old  # ...but not signing yet
        clock.advance(600)
        assert await signer() == new
        clock.advance(TOKEN_SECONDS + CLOCK_SKEW_SECONDS - 1)
        assert await published() == [old, new]  # tokens the old key signed may still be valid
        clock.advance(2)
        assert await published() == [new]
        assert [k.kid for k in await store.signing_key_list()] == [new]  # pruned


async def test_keys_rotate_by_age(store: Store, clock: FakeClock) -> None:
    async with served(store, clock, oidc_key_rotate_days=1, oidc_key_publish_seconds=60) as node:
        keys = node.app.state.identity.keys
        first = [k["kid"] for k in (await _jwks(node.client))["keys"]]
        clock.advance(86400)
        keys._read_at = None
        later = [k["kid"] for k in (await _jwks(node.client))["keys"]]
        assert len(first) == 1 and later[0] == first[0] and len(later) == 2
        assert len(await store.signing_key_list()) == 2


async def test_oidc_targets_are_checked_at_create_time(store: Store, clock: FakeClock) -> None:
    async with served(store, clock, public_url="") as node:
        acme = await node.tenant()
        url = "https://api.example.com/hook"
        cases: list[tuple[dict[str, Any], str]] = [
            ({"oidc": {}}, "target.auth.oidc"),  # no DUETIME_PUBLIC_URL: no issuer
            ({}, "target.auth"),
            ({"oidc": {}, "mtls": "c"}, "target.auth.mtls"),  # one kind per auth
            ({"oidc": {"audience": ""}}, "target.auth.oidc.audience"),
            ({"oidc": {"service_account": "a b"}}, "target.auth.oidc.service_account"),
            ({"saml": {}}, "target.auth"),  # not a kind of auth
        ]
        for auth, field in cases:
            body = {"target": {"type": "http", "url": url, "auth": auth}}
            resp = await node.client.post("/v1/tasks", json=body, headers=acme)
            assert resp.status_code == 422, (auth, resp.text)
            fields = [e.get("field") for e in resp.json().get("errors", [])] + [
                resp.json().get("field")
            ]
            assert field in fields, (auth, resp.json())
        both = {
            "type": "http",
            "url": url,
            "auth": {"oidc": {}},
            "headers": {"Authorization": "x"},
        }
        resp = await node.client.post("/v1/tasks", json={"target": both}, headers=acme)
        assert resp.status_code == 422 and "Authorization" in resp.text
        resp = await node.client.get("/.well-known/openid-configuration")
        assert resp.status_code == 404
        assert (await node.client.get("/v1/tasks", headers=ADMIN)).status_code == 401
