"""Who is making the current change, for the audit trail (SPEC §8: "who: API key id, node or
worker").

The API sets :data:`current_actor` around a tenant's change (``key:<key id>``, or ``dev`` in dev
mode); the stores read it in the transaction that makes the change and record it on the audit
event. Changes made with no actor set are attributed by the store itself: the lease holder
(``worker:<id>``) for claims and completions, the schedule for its occurrences, else ``node``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

current_actor: ContextVar[str | None] = ContextVar("duetime_actor", default=None)
"""The actor of the change being made in this context, or None (the store decides)."""


@contextlib.contextmanager
def acting_as(actor: str | None) -> Iterator[None]:
    """Attribute the changes made inside the block to ``actor``."""
    token = current_actor.set(actor)
    try:
        yield
    finally:
        current_actor.reset(token)
