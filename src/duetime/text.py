"""Outside text made safe for every store, in one place.

Text from outside — a webhook's reply, a worker's error, a label, a query filter — may hold what
one store keeps and the other refuses: PostgreSQL ``text`` cannot hold NUL, SQLite can; neither
can encode a lone surrogate as UTF-8. Two kinds of text, two rules:

- **Recorded text** (errors, reply snippets, logs) is *cleaned* with :func:`clean`: NUL, other C0
  controls except tab/newline/carriage return, DEL and lone surrogates become U+FFFD, and the
  text is cut to a byte limit on a character boundary. Recording never fails because of content.
- **Identifiers and filters** (queue and task names, label keys and values, ids in paths) are
  *checked* with :func:`check`: any control character or lone surrogate is a
  :class:`~duetime.errors.ValidationError` naming the field, so both stores answer alike — a 422,
  never a 500.
"""

from __future__ import annotations

import re

from duetime.errors import ValidationError

REPLACEMENT = "\ufffd"

_UNRECORDABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
"""Characters :func:`clean` replaces: C0 controls but tab, LF, CR; DEL; lone surrogates."""

_NOT_IDENTIFIER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Characters :func:`check` refuses: every C0 and C1 control, DEL, lone surrogates."""


def clean(text: str, limit_bytes: int) -> str:
    """``text`` with unrecordable characters replaced and cut to at most ``limit_bytes`` of UTF-8
    (never in the middle of a character)."""
    text = _UNRECORDABLE.sub(REPLACEMENT, text)
    encoded = text.encode("utf-8")
    if len(encoded) <= limit_bytes:
        return text
    return encoded[:limit_bytes].decode("utf-8", errors="ignore")


def is_clean(text: str) -> bool:
    """Whether ``text`` holds no character :func:`check` would refuse."""
    return _NOT_IDENTIFIER.search(text) is None


def check(text: str, field: str, *, max_length: int | None = None) -> str:
    """``text`` unchanged if it holds no control character or lone surrogate (and is at most
    ``max_length`` characters); otherwise raise :class:`ValidationError` naming ``field``."""
    bad = _NOT_IDENTIFIER.search(text)
    if bad is not None:
        code = ord(bad.group())
        raise ValidationError(
            f"{field} must not contain control characters or lone surrogates "
            f"(found U+{code:04X} at position {bad.start()})",
            field,
        )
    if max_length is not None and len(text) > max_length:
        raise ValidationError(f"{field} is longer than {max_length} characters", field)
    return text
