"""Broker credentials are sealed before they are stored and opened only to connect."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from yarl import URL

from duetime.config import Settings
from duetime.delivery.sealing import PREFIX, Sealer, SealError, sealer_for
from duetime.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("amqp://guest:p%40ss@127.0.0.1:5672/vhost", "p@ss"),
        ("redis://:hunter2@127.0.0.1:6379/0", "hunter2"),
        ("nats://s3cr3t-token@127.0.0.1:4222", "s3cr3t-token"),
    ],
)
def test_a_secret_is_sealed_and_opened_again(url: str, secret: str) -> None:
    sealer = Sealer(Fernet.generate_key())
    sealed = sealer.seal_url(url)
    assert secret not in sealed and PREFIX in sealed
    assert sealer.seal_url(sealed) == sealed, "never sealed twice"
    opened = URL(sealer.open_url(sealed))
    assert secret in (opened.password, opened.user)
    assert (opened.host, opened.port, opened.path) == (URL(url).host, URL(url).port, URL(url).path)


def test_urls_without_a_secret_are_left_alone() -> None:
    sealer = Sealer(Fernet.generate_key())
    for url in ("amqp://127.0.0.1/", "redis://127.0.0.1:6379/0", "nats://127.0.0.1:4222"):
        assert sealer.seal_url(url) == url
        assert sealer.open_url(url) == url


def test_another_key_cannot_open_it() -> None:
    sealed = Sealer(Fernet.generate_key()).seal_url("amqp://u:pw@127.0.0.1/")
    with pytest.raises(SealError, match="DUETIME_SECRET_KEY"):
        Sealer(Fernet.generate_key()).open_url(sealed)


def test_the_key_is_the_setting_or_a_private_file_made_once(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    sealed = sealer_for(Settings(secret_key=key)).seal_url("amqp://u:pw@127.0.0.1/")
    assert "pw" in Sealer(key).open_url(sealed)
    first = sealer_for(Settings(data_dir=tmp_path)).seal_url("amqp://u:pw@127.0.0.1/")
    key_file = tmp_path / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = sealer_for(Settings(data_dir=tmp_path))  # the same file, so the same key
    assert URL(again.open_url(first)).password == "pw"
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]


def test_a_malformed_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Fernet key"):
        Settings(secret_key="not-a-key").check()


def test_the_create_check_seals_one_url_the_same_way_every_time(tmp_path: Path) -> None:
    """A Fernet token is random; the node stores one URL one way, so its deliverers open each
    distinct URL once rather than once per task (an AMQP burst lost ~20 % without this)."""
    from duetime.delivery.registry import target_validator

    validate = target_validator(Settings(data_dir=tmp_path, allow_private_targets=True))
    target = {"type": "redis", "url": "redis://:hunter2@127.0.0.1:6379/0", "stream": "s"}
    first, again = validate(target), validate(dict(target))
    assert first is not None and again is not None
    assert first["url"] == again["url"] and "hunter2" not in first["url"]
    assert validate({"type": "redis", "url": "redis://127.0.0.1:6379/0", "stream": "s"}) is None
