"""The one place outside text is cleaned (recorded text) or checked (identifiers)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.text import REPLACEMENT, check, clean, is_clean


def test_clean_replaces_nul_controls_and_lone_surrogates_but_keeps_whitespace() -> None:
    assert clean("a\x00b\x07c\x7f\ud800d\te\nf\rg", 100) == (
        f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}{REPLACEMENT}d\te\nf\rg"
    )


def test_clean_cuts_on_a_character_boundary() -> None:
    assert clean("é" * 10, 5) == "éé"  # two bytes each: the third would be cut in half


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_clean_output_always_encodes_and_fits(text: str, limit: int) -> None:
    out = clean(text, limit)
    assert len(out.encode("utf-8")) <= limit
    assert "\x00" not in out


def test_check_refuses_control_characters_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        check("default\x00", "queue")
    assert caught.value.field == "queue"
    assert "U+0000" in caught.value.detail


def test_check_refuses_c1_controls_surrogates_and_long_text() -> None:
    for bad in ("a\x85b", "\udfff", "x\x1b[31m"):
        assert not is_clean(bad)
        with pytest.raises(ValidationError):
            check(bad, "name")
    with pytest.raises(ValidationError, match="longer than 3"):
        check("abcd", "name", max_length=3)
    assert check("billing ✓", "name", max_length=20) == "billing ✓"
