"""Standard Webhooks signatures: ours verify with the reference library, and back."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from duetime.auth import new_signing_secret
from duetime.delivery.signing import secret_key, sign, verify

SECRET_A = new_signing_secret()
SECRET_B = new_signing_secret()


def _headers(msg_id: str, timestamp: int, signature: str) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def test_one_secret_matches_the_reference_signature() -> None:
    timestamp = int(time.time())
    body = b'{"hello": "world"}'
    ours = sign("msg_1", timestamp, body, [SECRET_A])
    theirs = Webhook(SECRET_A).sign("msg_1", datetime.fromtimestamp(timestamp, UTC), body.decode())
    assert ours == theirs
    assert Webhook(SECRET_A).verify(body, _headers("msg_1", timestamp, ours)) == {"hello": "world"}


def test_two_secrets_give_two_signatures_each_verifiable() -> None:
    timestamp = int(time.time())
    body = '{"n": "é"}'.encode()
    header = sign("msg_2", timestamp, body, [SECRET_A, SECRET_B])
    entries = header.split(" ")
    assert len(entries) == 2
    assert all(e.startswith("v1,") for e in entries)
    for secret in (SECRET_A, SECRET_B):
        Webhook(secret).verify(body, _headers("msg_2", timestamp, header))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(body, _headers("msg_2", timestamp, header))


def test_verify_accepts_reference_signatures_and_rejects_tampering() -> None:
    timestamp = int(time.time())
    body = b"[1,2,3]"
    header = Webhook(SECRET_B).sign("msg_3", datetime.fromtimestamp(timestamp, UTC), "[1,2,3]")
    assert verify("msg_3", timestamp, body, header, [SECRET_A, SECRET_B])
    assert not verify("msg_3", timestamp, body, header, [SECRET_A])
    assert not verify("msg_3", timestamp, b"[1,2,4]", header, [SECRET_B])
    assert not verify("msg_4", timestamp, body, header, [SECRET_B])
    assert not verify("msg_3", timestamp + 1, body, header, [SECRET_B])


def test_verify_checks_the_timestamp_tolerance_when_given_now() -> None:
    header = sign("m", 1_000_000, b"{}", [SECRET_A])
    assert verify("m", 1_000_000, b"{}", header, [SECRET_A], now=1_000_299)
    assert not verify("m", 1_000_000, b"{}", header, [SECRET_A], now=1_000_301)
    assert not verify("m", 1_000_000, b"{}", header, [SECRET_A], now=999_000)
    assert verify("m", 1_000_000, b"{}", header, [SECRET_A], now=999_000, tolerance_seconds=1000)


def test_verify_skips_malformed_and_foreign_entries() -> None:
    good = sign("m", 5, b"x", [SECRET_A])
    noisy = f"v2,abc v1 v1,!!notbase64!! {good} garbage"
    assert verify("m", 5, b"x", noisy, [SECRET_A])
    assert not verify("m", 5, b"x", "v1,!!notbase64!! v2,abc", [SECRET_A])
    assert not verify("m", 5, b"x", "", [SECRET_A])


def test_secret_key_decodes_with_or_without_prefix_and_padding() -> None:
    raw = bytes(range(32))
    encoded = base64.b64encode(raw).decode()
    assert secret_key("whsec_" + encoded) == raw
    assert secret_key(encoded) == raw
    assert secret_key("whsec_" + encoded.rstrip("=")) == raw


def test_bad_secrets_raise_value_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        secret_key("whsec_")
    with pytest.raises(ValueError, match="base64"):
        sign("m", 1, b"", ["whsec_a"])  # one base64 char cannot be decoded
    with pytest.raises(ValueError, match="at least one"):
        sign("m", 1, b"", [])


@settings(max_examples=60, deadline=None)
@given(
    msg_id=st.text(st.characters(codec="ascii", exclude_characters=" ,"), min_size=1, max_size=40),
    body=st.text(max_size=300),
    timestamp=st.integers(min_value=0, max_value=2**33),
)
def test_any_message_signs_like_the_reference(msg_id: str, body: str, timestamp: int) -> None:
    data = body.encode()
    reference = Webhook(SECRET_A).sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body)
    assert sign(msg_id, timestamp, data, [SECRET_A]) == reference
    assert verify(msg_id, timestamp, data, reference, [SECRET_B, SECRET_A])


def test_a_message_carries_at_most_three_signatures_from_the_newest_secrets() -> None:
    secrets = [new_signing_secret() for _ in range(2000)]
    header = sign("msg_1", 1_700_000_000, b"{}", secrets)
    assert len(header.split()) == 3
    assert len(header) < 200
    assert verify("msg_1", 1_700_000_000, b"{}", header, secrets[-1:])
    assert not verify("msg_1", 1_700_000_000, b"{}", header, secrets[:1])
