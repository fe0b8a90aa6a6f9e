"""The node's key ring: the keys that seal credentials at rest, newest first.

The first key *seals* (and keys the fingerprints); every key *opens* what it sealed, so a key
can be replaced without a moment when stored values cannot be read:

1. put the new key first and keep the old one after it (``DUETIME_SECRET_KEYS=new,old``) on
   every node, and restart them: new values are sealed with the new key, old ones still open;
2. run ``duetime secrets rotate``: every stored sealed value is sealed again with the new key
   (online, in batches; run it again after an interruption: what is done is skipped);
3. drop the old key from the ring.

The keys come from ``DUETIME_SECRET_KEYS`` (Fernet keys separated by commas, spaces or new lines;
``DUETIME_SECRET_KEYS_FILE`` names a file of them, one a line, ``#`` comments allowed), else
``DUETIME_SECRET_KEY`` (one key, as earlier versions read it), else the data directory's
``secret.key`` (made on first use, mode 0600; it may hold several keys, one a line, newest
first). Nodes that share a store must share the ring.

A value is sealed for one tenant: the tenant's id is sealed with it and checked when it is
opened, and the fingerprint is keyed by it, so a value copied into another tenant's rows opens
nowhere. See :mod:`duetime.secrets.sealed` for the text of a sealed value.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from duetime.config import Settings, parse_keys
from duetime.errors import ConfigError
from duetime.secrets.sealed import PREFIX, PREFIX_V1, SEALED

__all__ = ["KEY_FILE", "KeyRing", "SealError", "key_id", "ring_for"]

KEY_FILE = "secret.key"
"""The key file made in the data directory when no key is configured."""

_MAX_MEMO = 4096
"""Sealed values a ring remembers by (tenant, plain value): the same credential sent again is
stored the same way (a Fernet token is random each time), so caches keyed by the stored text
(the broker deliverers' opened URLs) see one entry per credential, not one per task."""


class SealError(Exception):
    """A sealed value this node cannot open: another key sealed it, or another tenant's."""


def key_id(key: bytes) -> str:
    """The 8 hex characters that name ``key`` in the values it seals (a hash of the key: it
    says which key, never what the key is)."""
    return hashlib.sha256(b"duetime key id\x00" + key).hexdigest()[:8]


class _Key:
    __slots__ = ("fernet", "fingerprint_key", "id")

    def __init__(self, raw: str | bytes) -> None:
        text = raw.encode() if isinstance(raw, str) else raw
        try:
            self.fernet = Fernet(text)
            material = base64.urlsafe_b64decode(text)
        except (ValueError, binascii.Error):
            raise ConfigError(
                "a secret key must be a Fernet key (32 url-safe base64-encoded bytes), e.g. "
                'from: python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"'
            ) from None
        self.id = key_id(material)
        self.fingerprint_key = hmac.new(material, b"duetime fingerprint", "sha256").digest()


class KeyRing:
    """Seals with the first of ``keys``, opens with any of them (see the module).

    Raises :class:`~duetime.errors.ConfigError` for no key or one that is not a Fernet key.
    Safe to share within a process (its memo is a plain dict; the event loop is one thread).
    """

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        if not keys:
            raise ConfigError("the key ring needs at least one key")
        self._keys = [_Key(k) for k in keys]
        self._by_id = {k.id: k for k in reversed(self._keys)}  # the newest wins a (rare) clash
        self._legacy = MultiFernet([k.fernet for k in self._keys])
        self._memo: dict[tuple[str, str], str] = {}
        self._opened: dict[tuple[str, str], str] = {}

    @property
    def current_id(self) -> str:
        """The id of the key that seals."""
        return self._keys[0].id

    @property
    def key_ids(self) -> list[str]:
        """Every key's id, newest first."""
        return [k.id for k in self._keys]

    def digest(self, tenant_id: str, plain: str) -> str:
        """The keyed hash of ``plain`` for ``tenant_id`` under the current key (16 hex)."""
        return self._digest(self._keys[0], tenant_id, plain)

    @staticmethod
    def _digest(key: _Key, tenant_id: str, plain: str) -> str:
        message = tenant_id.encode() + b"\x00" + plain.encode()
        return hmac.new(key.fingerprint_key, message, "sha256").hexdigest()[:16]

    def seal(self, tenant_id: str, plain: str) -> str:
        """``plain`` sealed for ``tenant_id`` with the current key."""
        memo_key = (tenant_id, plain)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        key = self._keys[0]
        token = key.fernet.encrypt(tenant_id.encode() + b"\x00" + plain.encode()).decode()
        sealed = f"{PREFIX}{key.id}.{self._digest(key, tenant_id, plain)}.{token.rstrip('=')}"
        if len(self._memo) >= _MAX_MEMO:
            self._memo.clear()
        self._memo[memo_key] = sealed
        return sealed

    def open(self, tenant_id: str, sealed: str) -> str:
        """The plain value of ``sealed`` (one whole sealed value). Raises :class:`SealError`
        when no key of this ring sealed it, or it was sealed for another tenant. Each value is
        opened once, then found in memory (a burst to one target opens it once)."""
        memo_key = (tenant_id, sealed)
        found = self._opened.get(memo_key)
        if found is None:
            found = self._open(tenant_id, sealed)
            if len(self._opened) >= _MAX_MEMO:
                self._opened.clear()
            self._opened[memo_key] = found
        return found

    def _open(self, tenant_id: str, sealed: str) -> str:
        match = SEALED.fullmatch(sealed)
        if match is None:
            raise SealError("not a sealed value")
        if sealed.startswith(PREFIX_V1):  # one key, no tenant: try each key
            token = sealed[len(PREFIX_V1) :].replace("%3D", "=").replace("%3d", "=")
            try:
                return self._legacy.decrypt(token.encode()).decode()
            except InvalidToken:
                raise SealError(_missing("an earlier key")) from None
        key = self._by_id.get(match.group("kid"))
        if key is None:
            raise SealError(_missing(f"key {match.group('kid')}"))
        token = sealed.rsplit(".", 1)[1]
        token += "=" * (-len(token) % 4)
        try:
            data = key.fernet.decrypt(token.encode())
        except InvalidToken:
            raise SealError(_missing(f"key {match.group('kid')}")) from None
        owner, _, plain = data.partition(b"\x00")
        if owner.decode() != tenant_id:
            raise SealError("a sealed value of another tenant is not opened")
        return plain.decode()

    def open_text(self, tenant_id: str, text: str) -> str:
        """``text`` with every sealed value in it opened (the plain values as they were given:
        a caller that splices them into a URL encodes them itself)."""
        if "dtenc" not in text:
            return text
        return SEALED.sub(lambda m: self.open(tenant_id, m.group(0)), text)

    def reseal(self, tenant_id: str, text: str) -> str:
        """``text`` with every sealed value that the current key did not seal sealed again with
        it (opened, then sealed; the digest is recomputed under the current key)."""
        if "dtenc" not in text:
            return text

        def again(match: re.Match[str]) -> str:
            if match.group("kid") == self.current_id:
                return match.group(0)
            return self.seal(tenant_id, self.open(tenant_id, match.group(0)))

        return SEALED.sub(again, text)


def _missing(which: str) -> str:
    return (
        f"cannot open a stored credential: it was sealed with {which}, which is not in this "
        f"node's key ring (every node needs the same DUETIME_SECRET_KEYS)"
    )


def ring_for(settings: Settings, *, make: bool = True) -> KeyRing:
    """The node's ring (see the module for where the keys come from). One ring per distinct
    configuration in a process. Raises ``ConfigError`` for a key that is not a Fernet key, and,
    unless ``make``, when no key is configured and the data directory has no key file (a tool
    that rewrites stored values must use the nodes' ring, never a new key of its own)."""
    data_dir = Path(settings.data_dir).resolve()
    if not make and not settings.configured_keys and not (data_dir / KEY_FILE).exists():
        raise ConfigError(
            f"no key ring: set DUETIME_SECRET_KEYS (or DUETIME_SECRET_KEY) as on the nodes, or "
            f"--data-dir to the directory holding their {KEY_FILE}"
        )
    return _ring(tuple(settings.configured_keys), data_dir)


@functools.lru_cache(maxsize=8)
def _ring(keys: tuple[str, ...], data_dir: Path) -> KeyRing:
    return KeyRing(keys or parse_keys(_key_file(data_dir)))


def _key_file(data_dir: Path) -> str:
    """The data directory's key file, made (one new key, 0600) when there is none."""
    path = data_dir / KEY_FILE
    try:
        return path.read_text()
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = Fernet.generate_key()
    # Written whole under another name, then linked into place: of two processes making it at
    # once, one link wins and both use its key; nobody reads a half-written file.
    tmp = data_dir / f".{KEY_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return path.read_text()
    finally:
        tmp.unlink()
    return key.decode()
