from __future__ import annotations

import uuid

from duetime.ids import is_uuid, new_id


def test_ids_are_uuid7_and_strictly_increasing() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    parsed = uuid.UUID(ids[0])
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_is_uuid() -> None:
    assert is_uuid(new_id())
    assert not is_uuid("nope")
