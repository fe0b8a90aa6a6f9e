"""Broker credentials at rest: sealed before a target is stored, opened only to connect.

A broker URL's secret (its password, or the token of ``nats://token@host``) is replaced at create
time by ``dtenc1.<Fernet token>`` (AES-CBC with an HMAC-SHA256, from ``cryptography``): the store,
its backups, schedule templates and every response hold only that (responses show ``***``
anyway, :mod:`duetime.delivery.redact`). The broker deliverer opens it right before it connects.

The key is ``DUETIME_SECRET_KEY`` (a Fernet key: 32 url-safe base64-encoded bytes, e.g. from
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``),
else a key made once in the data directory (``secret.key``, mode 0600). Nodes that share a
PostgreSQL store must share the key: set the variable, the same, on every node. A node that
cannot open a sealed secret fails the attempt (retryable) saying so, and the task waits for a
node that can.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from yarl import URL

from duetime.config import Settings
from duetime.delivery.redact import secret_of
from duetime.errors import ConfigError

__all__ = ["PREFIX", "SealError", "Sealer", "sealer_for"]

PREFIX = "dtenc1."
"""What a sealed secret starts with (so a URL is never sealed twice)."""

KEY_FILE = "secret.key"


class SealError(Exception):
    """A sealed secret this node cannot open (another key sealed it)."""


class Sealer:
    """Seals and opens the secret of a broker URL with one Fernet key."""

    def __init__(self, key: str | bytes) -> None:
        self._fernet = Fernet(key)

    def seal_url(self, url: str) -> str:
        """``url`` with its secret sealed (unchanged when it has none or is sealed already)."""
        parsed = URL(url)
        secret, in_user = secret_of(parsed)
        if not secret or secret.startswith(PREFIX):
            return url
        token = PREFIX + self._fernet.encrypt(secret.encode()).decode()
        return str(parsed.with_user(token) if in_user else parsed.with_password(token))

    def open_url(self, url: str) -> str:
        """``url`` with a sealed secret opened (unchanged when it has none). Raises
        :class:`SealError` when this key did not seal it."""
        parsed = URL(url)
        secret, in_user = secret_of(parsed)
        if not secret or not secret.startswith(PREFIX):
            return url
        try:
            plain = self._fernet.decrypt(secret[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            raise SealError(
                "cannot open the stored broker credentials with this node's key: every node "
                "must have the same DUETIME_SECRET_KEY"
            ) from None
        return str(parsed.with_user(plain) if in_user else parsed.with_password(plain))


def sealer_for(settings: Settings) -> Sealer:
    """The node's sealer: ``settings.secret_key``, else the data directory's key file (made
    on first use, 0600). Raises :class:`ConfigError` for a key that is not a Fernet key."""
    key = settings.secret_key or _key_file(Path(settings.data_dir))
    try:
        return Sealer(key)
    except ValueError:
        raise ConfigError(
            "DUETIME_SECRET_KEY must be a Fernet key (32 url-safe base64-encoded bytes)"
        ) from None


def _key_file(data_dir: Path) -> str:
    path = data_dir / KEY_FILE
    try:
        return path.read_text().strip()
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
        return path.read_text().strip()
    finally:
        tmp.unlink()
    return key.decode()
