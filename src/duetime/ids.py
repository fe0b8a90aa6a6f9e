"""Identifiers: UUIDv7 (time-ordered), so ids sort by creation and index well."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_seq = 0
_SEQ_MAX = 0xFFF


def new_id() -> str:
    """A new RFC 9562 UUIDv7 as a string, monotonic within this process.

    48-bit unix milliseconds, then a 12-bit counter (RFC 9562 "method 1": ids made in the same
    millisecond still sort in creation order, so "newest first" listings and their cursors are
    exact), then 62 random bits. When the counter overflows, the timestamp is advanced by one.
    """
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, int.from_bytes(os.urandom(1), "big")  # random start, room to count
        else:
            _seq += 1
            if _seq > _SEQ_MAX:
                _last_ms, _seq = _last_ms + 1, 0
        ms, seq = _last_ms, _seq
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= seq << 64  # rand_a as a counter
    value |= 0b10 << 62  # variant
    value |= int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)  # rand_b
    return str(uuid.UUID(int=value))


def uuid_text(text: str) -> str | None:
    """``text`` in the canonical spelling of a UUID (any version: lower case, hyphens), or None
    when it does not parse as one."""
    try:
        return str(uuid.UUID(text))
    except (ValueError, AttributeError, TypeError):
        return None


def is_uuid(text: str) -> bool:
    """Whether ``text`` parses as a UUID (any version)."""
    return uuid_text(text) is not None
