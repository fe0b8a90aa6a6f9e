"""Credentials: API keys (stored only as SHA-256 hashes) and webhook signing secrets.

An API key reads ``dt_<key id>_<secret>``; the key id is public (it names the key in admin calls),
the secret part is 32 random bytes. Keys carry full entropy, so one SHA-256 is the right hash: a
slow password hash would add nothing but latency to every request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

API_KEY_PREFIX = "dt_"
SIGNING_SECRET_PREFIX = "whsec_"


def new_api_key() -> tuple[str, str]:
    """A new key: (key_id, plaintext). Show the plaintext once; store :func:`hash_api_key`."""
    key_id = secrets.token_hex(8)
    return key_id, f"{API_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def hash_api_key(plaintext: str) -> str:
    """The value stored for a key: hex SHA-256 of the whole key."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def api_key_matches(plaintext: str, key_hash: str) -> bool:
    return hmac.compare_digest(hash_api_key(plaintext), key_hash)


def new_signing_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` + base64 of 32 random bytes."""
    return SIGNING_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
