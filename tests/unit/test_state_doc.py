"""The drawn life cycle (docs/state-machine.md) and the code's transition table agree."""

from __future__ import annotations

import re
from pathlib import Path

from duetime.states import TRANSITIONS
from duetime.types import TaskStatus

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-machine.md"
EDGE = re.compile(r"^\s*(\[\*\]|\w+) --> (\w+): (\w+)\s*$")


def test_diagram_lists_exactly_the_transition_table() -> None:
    drawn = {}
    for line in DOC.read_text().splitlines():
        match = EDGE.match(line)
        if match:
            before, after, action = match.groups()
            key = (None if before == "[*]" else TaskStatus(before), TaskStatus(after))
            drawn[key] = action
    assert drawn == TRANSITIONS
