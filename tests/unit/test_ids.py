from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from duetime.ids import is_uuid, new_id, new_ids, uuid_text


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


def _parsed(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except (ValueError, AttributeError, TypeError):
        return None


@given(
    st.uuids().flatmap(
        lambda u: st.sampled_from(
            [
                str(u),
                str(u).upper(),
                u.hex,
                f"{{{u}}}",
                f"urn:uuid:{u}",
                f"{u}\n",
                f" {u}",
                str(u)[:-1],
            ]
        )
    )
    | st.text(alphabet="0123456789abcdefABCDEF-{}x \n", max_size=40)
)
def test_uuid_text_spells_what_uuid_parses(text: str) -> None:
    """The canonical-spelling shortcut agrees with parsing, for every spelling uuid.UUID takes
    and for near misses."""
    assert uuid_text(text) == _parsed(text)
