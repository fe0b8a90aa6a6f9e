from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from duetime.ids import id_prefix_range, is_uuid, new_id, new_ids, uuid_text


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


@given(st.uuids(), st.uuids(), st.integers(min_value=4, max_value=32), st.booleans())
def test_an_id_prefix_range_holds_exactly_the_ids_that_start_with_it(
    found: uuid.UUID, other: uuid.UUID, digits: int, upper: bool
) -> None:
    text, another = str(found), str(other)
    hexes = text.replace("-", "")[:digits]
    dashed = next(text[:end] for end in range(37) if len(text[:end].replace("-", "")) == digits)
    for prefix in (hexes, dashed):
        bounds = id_prefix_range(prefix.upper() if upper else prefix)
        assert bounds is not None
        low, high = bounds
        assert low <= text and (high is None or text < high)  # the id is in its prefix's range
        inside = low <= another and (high is None or another < high)
        assert inside == another.replace("-", "").startswith(hexes)  # and only ids like it


def test_what_is_not_an_id_prefix() -> None:
    for text in ("", "abc", "01-9", "0190-f000", "zzzz", "0190f000-7c3a-7000-8000-0000000000001"):
        assert id_prefix_range(text) is None, text
    assert id_prefix_range("0190F000-") == (
        "0190f000-0000-0000-0000-000000000000",
        "0190f001-0000-0000-0000-000000000000",
    )
    assert id_prefix_range("ffff") == ("ffff0000-0000-0000-0000-000000000000", None)
    assert id_prefix_range("0190f00f") == (
        "0190f00f-0000-0000-0000-000000000000",
        "0190f010-0000-0000-0000-000000000000",
    )
