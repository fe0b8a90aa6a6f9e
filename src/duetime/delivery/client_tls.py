"""TLS client certificates (mTLS) that webhooks present: checking one when a tenant stores it,
and the TLS context a delivery dials with.

A tenant stores a certificate chain and its private key under a name
(``PUT /v1/client-certificates/{name}``); the key is sealed at rest
(:mod:`duetime.delivery.sealing`) and never returned. A target saying ``"auth": {"mtls":
"<name>"}`` is dialled with a TLS context holding that certificate: its own connection pool, so
a connection authenticated as one certificate never carries another's request.

The standard library loads a certificate only from files: the chain is written to a private
temporary file and the key to another, *encrypted* with a random one-time password
(PKCS#8, from ``cryptography``), so the plain key never touches a disk; both are removed at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from duetime.errors import ValidationError

__all__ = ["CheckedCertificate", "check_client_certificate", "client_context"]

MAX_PEM_CHARS = 64 * 1024
_KEY_TYPES = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey,
              ed448.Ed448PrivateKey)  # fmt: skip


@dataclass(frozen=True, slots=True)
class CheckedCertificate:
    """A certificate chain and key that belong together, in the forms the store keeps."""

    chain_pem: str
    key_pem: str
    fingerprint: str
    """SHA-256 of the leaf certificate (DER), hex."""
    subject: str
    not_after: datetime


def check_client_certificate(
    certificate: str, private_key: str, *, now: datetime
) -> CheckedCertificate:
    """Parse a PEM chain (leaf first) and an unencrypted PEM private key; refuse them
    (``ValidationError`` naming ``certificate`` or ``private_key``) unless the key is the
    leaf's and the leaf is valid at ``now``."""
    try:
        chain = x509.load_pem_x509_certificates(certificate.encode())
    except ValueError:
        raise ValidationError(
            "is not a PEM certificate chain (-----BEGIN CERTIFICATE-----)", "certificate"
        ) from None
    try:
        key = serialization.load_pem_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError):
        raise ValidationError(
            "is not an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)", "private_key"
        ) from None
    if not isinstance(key, _KEY_TYPES):
        raise ValidationError("is not an RSA, EC or EdDSA key", "private_key")
    leaf = chain[0]
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, pub) != leaf.public_key().public_bytes(der, pub):
        raise ValidationError("does not belong to the certificate's first entry", "private_key")
    not_after = leaf.not_valid_after_utc
    if not_after <= now or leaf.not_valid_before_utc > now:
        raise ValidationError(
            f"is not valid now (valid from {leaf.not_valid_before_utc.isoformat()} "
            f"to {not_after.isoformat()})",
            "certificate",
        )
    chain_pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in chain)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return CheckedCertificate(
        chain_pem=chain_pem,
        key_pem=key_pem,
        fingerprint=hashlib.sha256(leaf.public_bytes(der)).hexdigest(),
        subject=leaf.subject.rfc4514_string(),
        not_after=not_after.astimezone(UTC),
    )


def client_context(
    chain_pem: str, key_pem: str, base: Callable[[], ssl.SSLContext]
) -> ssl.SSLContext:
    """``base()`` (the context that verifies servers) with the client certificate loaded."""
    context = base()
    password = secrets.token_bytes(32)
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    with contextlib.ExitStack() as stack:
        paths = []
        for data in (chain_pem.encode(), encrypted):
            fd, path = tempfile.mkstemp(prefix="duetime-mtls-", suffix=".pem")  # mode 0600
            stack.callback(os.unlink, path)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1], password=password)
    return context
