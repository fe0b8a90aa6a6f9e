"""Which parts of a target are credentials: sealed before they are stored, opened to deliver,
shown as *** and a fingerprint; a target given with a sealed value is refused."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from duetime.delivery.base import Delivery
from duetime.delivery.redact import public_target, scrub_all
from duetime.delivery.sealing import SealError, TargetSealer
from duetime.delivery.webhook import WebhookDeliverer
from duetime.errors import ValidationError
from duetime.secrets.keyring import KeyRing
from duetime.secrets.sealed import fingerprint_of
from duetime.testing.fakes import running_task

RING = KeyRing([Fernet.generate_key()])
SEALER = TargetSealer(lambda: RING)


def _sealed(target: dict[str, Any]) -> dict[str, Any]:
    return dict(SEALER.seal(target, "t1"))


@pytest.mark.parametrize(
    ("target", "secret"),
    [
        (
            {"type": "http", "url": "https://h/", "headers": {"Authorization": "Bearer s3cr3t"}},
            "s3cr3t",
        ),
        ({"type": "http", "url": "https://h/", "headers": {"X-API-Key": "k-123456"}}, "k-123456"),
        ({"type": "http", "url": "https://h/", "headers": {"Cookie": "sid=abcdef"}}, "abcdef"),
        (
            {
                "type": "http",
                "url": "https://h/",
                "headers": {"X-Sig": "v1=zz99"},
                "secret_headers": ["x-sig"],
            },
            "zz99",
        ),
        ({"type": "http", "url": "https://bob:p%40ss@h/"}, "p@ss"),
        ({"type": "http", "url": "https://ghp_token@h/"}, "ghp_token"),
        ({"type": "http", "url": "https://h/hook?x=1&token=tok-42&sig=abc9"}, "tok-42"),
        (
            {"type": "amqp", "url": "amqp://guest:p%40ss@127.0.0.1:5672/vh", "routing_key": "q"},
            "p@ss",
        ),
        ({"type": "redis", "url": "redis://:hunter2@127.0.0.1:6379/0", "stream": "s"}, "hunter2"),
        (
            {"type": "redis", "url": "redis://127.0.0.1:6379/0?password=hunter2", "stream": "s"},
            "hunter2",
        ),
        (
            {"type": "nats", "url": "nats://s3cr3t-token@127.0.0.1:4222", "subject": "a"},
            "s3cr3t-token",
        ),
    ],
)
def test_every_credential_is_sealed_opened_again_and_shown_with_a_fingerprint(
    target: dict[str, Any], secret: str
) -> None:
    sealed = _sealed(target)
    assert secret not in str(sealed) and "dtenc2." in str(sealed)
    assert SEALER.open(sealed, "t1") == target
    shown = public_target(sealed)
    assert secret not in str(shown) and "dtenc" not in str(shown)
    fp = fingerprint_of(str(sealed))
    assert f"***{fp}" in str(shown)


def test_a_target_without_credentials_is_stored_and_shown_as_given() -> None:
    target = {"type": "http", "url": "https://h/p?page=2", "headers": {"X-Thing": "1"}}
    assert SEALER.seal(target, "t1") is target
    assert public_target(target) is target
    assert SEALER.seal({"type": "worker"}, "t1") == {"type": "worker"}


def test_plain_credentials_stored_before_sealing_are_shown_as_stars() -> None:
    legacy = {
        "type": "http",
        "url": "https://u:pw@h/?token=abc",
        "headers": {"authorization": "Bearer old", "X-Thing": "1"},
    }
    shown = public_target(legacy)
    assert shown["headers"] == {"authorization": "***", "X-Thing": "1"}
    assert shown["url"] == "https://u:***@h/?token=***"


def test_reseal_seals_plain_legacy_values_and_moves_old_keys_to_the_newest() -> None:
    old_key, new_key = Fernet.generate_key(), Fernet.generate_key()
    target = {
        "type": "http",
        "url": "https://u:pw%40sec@h/",
        "headers": {"Authorization": "Bearer a-token"},
    }
    under_old = TargetSealer(lambda: KeyRing([old_key])).seal(
        {**target, "url": "https://h/?token=tk"}, "t1"
    )
    rotating = TargetSealer(lambda: KeyRing([new_key, old_key]))
    moved = rotating.reseal(under_old, "t1")
    newest = TargetSealer(lambda: KeyRing([new_key]))
    assert newest.open(moved, "t1") == {**target, "url": "https://h/?token=tk"}
    legacy = rotating.reseal(target, "t1")  # stored in plain before sealing existed
    assert "pw@sec" not in str(legacy) and "Bearer a-token" not in str(legacy)
    assert newest.open(legacy, "t1") == target
    with pytest.raises(SealError):
        newest.reseal(under_old, "t1")  # the old key is gone: nothing is written


def test_a_target_given_with_a_sealed_value_is_refused_naming_the_field() -> None:
    sealed = RING.seal("t1", "x")
    with pytest.raises(ValidationError) as err:
        SEALER.seal({"type": "http", "url": "https://h/", "headers": {"A": sealed}}, "t2")
    assert err.value.field == "target.headers.A"


def test_scrub_removes_every_spelling_of_a_credential() -> None:
    text = 'denied: "Bearer tok-1" (token tok-1, p%40ss, p@ss) private'
    assert (
        scrub_all(text, ["Bearer tok-1", "p@ss"]) == 'denied: "***" (token ***, ***, ***) private'
    )
    assert scrub_all("password p refused", ["p"]) == "password *** refused"


async def test_a_node_without_the_sealing_key_fails_the_attempt_to_be_retried_elsewhere() -> None:
    target = {"type": "http", "url": "https://h.example/", "headers": {"X-Api-Key": "k-4455"}}
    sealed = SEALER.seal(target, "default")
    other = TargetSealer(lambda: KeyRing([Fernet.generate_key()]))
    deliverer = WebhookDeliverer(allow_private=False, sealer=other)
    try:
        outcome = await deliverer.deliver(Delivery(running_task(sealed), 1))
    finally:
        await deliverer.close()
    assert not outcome.succeeded and outcome.retryable
    assert outcome.error is not None and "DUETIME_SECRET_KEYS" in outcome.error


async def test_a_named_credential_cannot_be_read_without_a_source() -> None:
    target = {"type": "http", "url": "https://h.example/", "auth": {"credential": "c"}}
    deliverer = WebhookDeliverer(allow_private=False, sealer=SEALER)
    try:
        outcome = await deliverer.deliver(Delivery(running_task(target), 1))
    finally:
        await deliverer.close()
    assert not outcome.succeeded and not outcome.retryable
