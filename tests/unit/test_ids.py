from __future__ import annotations

import uuid

from duetime.ids import is_uuid, new_id, new_ids


def test_ids_are_uuid7_and_strictly_increasing() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    parsed = uuid.UUID(ids[0])
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_is_uuid() -> None:
    assert is_uuid(new_id())
    assert not is_uuid("nope")


def test_batches_of_ids_count_past_the_millisecond_and_interleave_with_single_ones() -> None:
    ids = [*new_ids(10_000), new_id(), *new_ids(3), new_id(), *new_ids(1)]  # 4,096 per ms at most
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert new_ids(0) == []
