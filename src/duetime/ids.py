"""Identifiers: UUIDv7 (time-ordered), so ids sort by creation and index well."""

from __future__ import annotations

import os
import time
import uuid


def new_id() -> str:
    """A new RFC 9562 UUIDv7 as a string: 48-bit unix milliseconds, then random bits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 68) & 0xFFF) << 64  # rand_a (12 bits)
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)  # rand_b
    return str(uuid.UUID(int=value))


def is_uuid(text: str) -> bool:
    """Whether ``text`` parses as a UUID (any version)."""
    try:
        uuid.UUID(text)
    except (ValueError, AttributeError, TypeError):
        return False
    return True
