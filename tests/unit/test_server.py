from __future__ import annotations

import pytest

from duetime.config import Settings
from duetime.errors import ConfigError, ValidationError
from duetime.server import build_target_validator


def test_target_validator_refuses_types_without_a_deliverer() -> None:
    validate = build_target_validator(Settings(admin_token="t"))
    validate({"type": "worker"})
    with pytest.raises(ValidationError) as err:
        validate({"type": "amqp", "url": "amqp://127.0.0.1", "exchange": "x"})
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
