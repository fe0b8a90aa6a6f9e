"""``duetime secrets rotate``: every stored credential sealed again with the current key.

After a new key is put first in the ring (:mod:`duetime.secrets.keyring`), :func:`rotate` walks
every row that may hold a credential (:data:`duetime.store.core.credentials.SEALED_TABLES`: task
targets, schedule templates, notification targets, named credentials, OIDC signing keys and TLS
client certificate keys), page by page in key order, and writes back each one whose sealed
values another key sealed, sealed with the current key; a credential stored in plain before
sealing existed is sealed on the way. Each write is conditional on the row still holding what
was read, so it runs beside live nodes (which open both keys meanwhile), and a second run skips
what the first did: an interrupted rotation is resumed by running it again. A value no key of
the ring opens is counted and left as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from duetime.delivery.sealing import NODE, SealError, TargetSealer
from duetime.store.core.credentials import NODE_SEALED, SEALED_TABLES
from duetime.store.protocols import SealedStore
from duetime.types import SealedRow

__all__ = ["Rotation", "rotate"]

Progress = Callable[[str, int, int], None]
"""Told after each page: (table, rows read so far, rows written so far)."""


@dataclass(slots=True)
class Rotation:
    """What a rotation did, per table."""

    key_id: str
    """The key every value is now sealed with."""
    read: dict[str, int] = field(default_factory=dict)
    """Rows read that may hold a credential."""
    resealed: dict[str, int] = field(default_factory=dict)
    """Rows written back sealed with the current key."""
    changed: dict[str, int] = field(default_factory=dict)
    """Rows that changed between read and write: left for the next run."""
    unopened: dict[str, int] = field(default_factory=dict)
    """Rows holding a value no key of the ring opens: left as they are."""

    @property
    def complete(self) -> bool:
        """Whether every value read is now sealed with the current key."""
        return not any(self.changed.values()) and not any(self.unopened.values())

    def as_json(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "complete": self.complete,
            "read": self.read,
            "resealed": self.resealed,
            "changed": self.changed,
            "unopened": self.unopened,
        }


def _resealed(sealer: TargetSealer, row: SealedRow) -> str | None:
    """The text to write in place of ``row.raw`` (None: nothing to change)."""
    if row.table == "credentials" or row.table in NODE_SEALED:
        again = sealer.ring.reseal(NODE if row.table in NODE_SEALED else row.tenant_id, row.raw)
        return None if again == row.raw else again
    doc = orjson.loads(row.raw)
    if row.table == "schedules":
        target = doc.get("target") if isinstance(doc, dict) else None
        if not isinstance(target, Mapping):
            return None
        new_target = sealer.reseal(target, row.tenant_id)
        if new_target is target:
            return None
        return orjson.dumps({**doc, "target": dict(new_target)}).decode()
    if not isinstance(doc, Mapping):
        return None
    new = sealer.reseal(doc, row.tenant_id)
    return None if new is doc else orjson.dumps(dict(new)).decode()


async def rotate(
    store: SealedStore,
    sealer: TargetSealer,
    *,
    batch: int = 500,
    tables: Sequence[str] = SEALED_TABLES,
    progress: Progress | None = None,
) -> Rotation:
    """Seal every stored credential with ``sealer``'s current key (see the module)."""
    report = Rotation(sealer.ring.current_id)
    for table in tables:
        read = resealed = changed = unopened = 0
        after: SealedRow | None = None
        while True:
            page = await store.sealed_page(table, after, batch)
            for row in page:
                try:
                    new = _resealed(sealer, row)
                except SealError:
                    unopened += 1
                    continue
                if new is None:
                    continue
                if await store.sealed_replace(row, new):
                    resealed += 1
                else:
                    changed += 1
            read += len(page)
            if progress is not None:
                progress(table, read, resealed)
            if len(page) < batch:
                break
            after = page[-1]
        report.read[table] = read
        report.resealed[table] = resealed
        report.changed[table] = changed
        report.unopened[table] = unopened
    return report
