"""The key ring: the first key seals, every key opens, values are bound to their tenant, and the
text of a sealed value is shown as *** and a fingerprint without any key."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from duetime.config import Settings, load_settings
from duetime.errors import ConfigError
from duetime.secrets.keyring import KeyRing, SealError, key_id, ring_for
from duetime.secrets.sealed import (
    PREFIX,
    contains_sealed,
    fingerprint_of,
    key_ids,
    redact,
    redact_text,
)

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_a_value_is_sealed_with_the_first_key_and_opened_again() -> None:
    ring = KeyRing([NEW, OLD])
    sealed = ring.seal("t1", "Bearer s3cr3t")
    assert "s3cr3t" not in sealed and sealed.startswith(f"{PREFIX}{ring.current_id}.")
    assert ring.current_id == key_id(base64.urlsafe_b64decode(NEW))
    assert ring.open("t1", sealed) == "Bearer s3cr3t"
    assert set(sealed) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def test_an_older_key_still_opens_what_it_sealed_and_reseal_moves_it_to_the_newest() -> None:
    before = KeyRing([OLD]).seal("t1", "hunter2")
    ring = KeyRing([NEW, OLD])
    assert ring.open("t1", before) == "hunter2"
    again = ring.reseal("t1", f"amqp://u:{before}@mq/")
    assert key_ids(again) == {ring.current_id}
    assert KeyRing([NEW]).open_text("t1", again) == "amqp://u:hunter2@mq/"
    assert ring.reseal("t1", again) == again, "values of the current key are left alone"


def test_a_ring_without_the_sealing_key_says_which_key_is_missing() -> None:
    sealed = KeyRing([OLD]).seal("t1", "x")
    with pytest.raises(SealError, match="DUETIME_SECRET_KEYS") as err:
        KeyRing([NEW]).open("t1", sealed)
    assert KeyRing([OLD]).current_id in str(err.value)


def test_a_value_sealed_for_one_tenant_opens_for_no_other() -> None:
    ring = KeyRing([NEW])
    with pytest.raises(SealError, match="another tenant"):
        ring.open("t2", ring.seal("t1", "x"))


def test_values_sealed_by_earlier_versions_open_and_reseal() -> None:
    legacy = "dtenc1." + Fernet(OLD).encrypt(b"guest").decode()
    ring = KeyRing([NEW, OLD])
    assert ring.open("anyone", legacy) == "guest"
    assert redact_text(f"amqp://u:{legacy}@mq/") == "amqp://u:***@mq/"
    assert key_ids(ring.reseal("t1", legacy)) == {ring.current_id}


def test_the_same_value_is_sealed_the_same_way_and_fingerprints_tell_values_apart() -> None:
    ring = KeyRing([NEW])
    first, again, other = ring.seal("t", "a"), ring.seal("t", "a"), ring.seal("t", "b")
    assert first == again
    assert fingerprint_of(first) == fingerprint_of(KeyRing([NEW]).seal("t", "a"))
    assert fingerprint_of(first) != fingerprint_of(other)
    assert fingerprint_of(first) != fingerprint_of(ring.seal("u", "a")), "keyed by tenant"
    fp = fingerprint_of(first)
    assert fp is not None and len(fp) == 8


def test_redact_shows_every_sealed_value_anywhere_in_json_as_stars_and_fingerprint() -> None:
    ring = KeyRing([NEW])
    sealed = ring.seal("t", "Bearer xyz")
    doc = {"a": [1, {"h": sealed}], "url": f"https://x/?token={sealed}", "n": None}
    shown = redact(doc)
    fp = fingerprint_of(sealed)
    assert shown == {"a": [1, {"h": f"***{fp}"}], "url": f"https://x/?token=***{fp}", "n": None}
    plain = {"a": [1, 2], "b": "text"}
    assert redact(plain) is plain, "nothing to hide costs no copy"
    assert contains_sealed(doc) and not contains_sealed(plain)


def test_keys_come_from_the_list_then_the_single_key_then_a_private_file(tmp_path: Path) -> None:
    ring = ring_for(Settings(secret_keys=f"{NEW}, {OLD}\n# retired next month", data_dir=tmp_path))
    assert ring.key_ids == [KeyRing([NEW]).current_id, KeyRing([OLD]).current_id]
    assert (
        ring_for(Settings(secret_key=OLD, data_dir=tmp_path)).current_id
        == KeyRing([OLD]).current_id
    )
    assert not (tmp_path / "secret.key").exists(), "a configured key makes no file"
    made = ring_for(Settings(data_dir=tmp_path / "data"))
    key_file = tmp_path / "data" / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert made.open("t", made.seal("t", "v")) == "v"
    # The file may hold several keys, newest first.
    two = tmp_path / "two"
    two.mkdir()
    (two / "secret.key").write_text(f"{NEW}\n{OLD}\n")
    assert ring_for(Settings(data_dir=two)).key_ids == ring.key_ids


def test_the_ring_reads_a_key_file_variable(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# newest first\n{NEW}\n{OLD}\n")
    settings = load_settings(environ={"DUETIME_SECRET_KEYS_FILE": str(keys)})
    assert settings.configured_keys == [NEW, OLD]


def test_malformed_or_doubled_keys_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="DUETIME_SECRET_KEY must be a Fernet key"):
        Settings(secret_key="not-a-key").check()
    with pytest.raises(ConfigError, match=r"DUETIME_SECRET_KEYS \(key 2\) must be a Fernet key"):
        Settings(secret_keys=f"{NEW},nope").check()
    with pytest.raises(ConfigError, match="both DUETIME_SECRET_KEY and DUETIME_SECRET_KEYS"):
        Settings(secret_key=OLD, secret_keys=NEW).check()
    with pytest.raises(ConfigError, match="holds no key"):
        Settings(secret_keys="# nothing yet").check()
