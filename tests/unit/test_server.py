from __future__ import annotations

import pytest

from duetime.config import Settings
from duetime.errors import ConfigError, ValidationError
from duetime.server import build_target_validator


def test_target_validator_checks_every_served_type() -> None:
    validate = build_target_validator(Settings(admin_token="t"))
    validate({"type": "worker"})
    validate({"type": "amqp", "url": "amqp://mq.example", "exchange": "x"})
    with pytest.raises(ValidationError) as err:
        validate({"type": "amqp", "url": "amqp://127.0.0.1", "exchange": "x"})
    assert err.value.field == "target.url"  # the private-address guard, as for webhooks
    with pytest.raises(ValidationError) as err:
        validate({"type": "carrier-pigeon"})
    assert err.value.field == "target.type"


def test_target_validator_applies_the_private_address_guard() -> None:
    strict = build_target_validator(Settings(admin_token="t"))
    with pytest.raises(ValidationError) as err:
        strict({"type": "http", "url": "http://10.1.2.3/hook"})
    assert err.value.field == "target.url"
    dev = build_target_validator(Settings())  # dev mode allows private targets
    dev({"type": "http", "url": "http://127.0.0.1:9/hook"})


def test_dev_mode_is_refused_on_a_public_bind() -> None:
    with pytest.raises(ConfigError):
        Settings(host="0.0.0.0").check()
    Settings(host="0.0.0.0", admin_token="t").check()


def test_dispatch_processes_default_to_one_per_core_on_postgresql_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    pg = "postgresql://postgres@127.0.0.1/test"
    assert Settings(db=pg).dispatch_process_count == 2
    assert Settings(db="sqlite:///x.db").dispatch_process_count == 1
    assert Settings().dispatch_process_count == 1  # the embedded default is SQLite
    monkeypatch.setattr("os.cpu_count", lambda: 32)
    assert Settings(db=pg).dispatch_process_count == 4
    assert Settings(db=pg, dispatch_processes=6).dispatch_process_count == 6


def test_dispatch_processes_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs PostgreSQL"):
        Settings(db="sqlite:///x.db", dispatch_processes=2).check()
    with pytest.raises(ConfigError, match="dispatch_processes must be"):
        Settings(dispatch_processes=-1).check()
    pg = "postgresql://postgres@127.0.0.1/test"
    with pytest.raises(ConfigError, match="at least dispatch_processes"):
        Settings(db=pg, dispatch_processes=4, dispatch_concurrency=3).check()


def test_the_node_concurrency_is_shared_by_its_processes() -> None:
    from duetime.engine.processes import for_process

    settings = Settings(
        db="postgresql://postgres@127.0.0.1/test", dispatch_processes=3, dispatch_concurrency=512
    )
    parts = [for_process(settings, i).dispatch_concurrency for i in range(3)]
    assert sum(parts) == 512 and max(parts) - min(parts) <= 1
