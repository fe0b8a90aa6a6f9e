"""The transition table: ``is_legal`` and the table's own sanity (every state reachable, terminal
states left only by a replay, the doc's rules about who moves a task)."""

from __future__ import annotations

import itertools

import pytest

from duetime.states import (
    TRANSITIONS,
    after_attempt,
    after_cancel_request,
    after_release,
    is_legal,
)
from duetime.types import PATCHABLE_STATUSES, TERMINAL_STATUSES, TaskStatus

S = TaskStatus
ACTIONS = {
    "create",
    "handoff",
    "dependencies",
    "promoter",
    "patch",
    "claim",
    "complete",
    "release",
    "cancel",
    "retry",
    "replay",
}


def _successors(status: TaskStatus | None) -> set[TaskStatus]:
    return {after for (before, after) in TRANSITIONS if before == status}


@pytest.mark.parametrize(("before", "after"), list(TRANSITIONS))
def test_every_table_edge_is_legal(before: TaskStatus | None, after: TaskStatus) -> None:
    assert is_legal(before, after)


@pytest.mark.parametrize("status", list(S))
def test_a_no_op_is_legal(status: TaskStatus) -> None:
    assert is_legal(status, status)


def test_edges_outside_the_table_are_illegal() -> None:
    illegal = [
        (before, after)
        for before, after in itertools.product([None, *S], S)
        if before != after and (before, after) not in TRANSITIONS
    ]
    assert illegal  # the table is not "everything goes"
    for before, after in illegal:
        assert not is_legal(before, after), (before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, S.SUCCEEDED),
        (None, S.RETRYING),
        (S.FAILED, S.SCHEDULED),
        (S.SCHEDULED, S.RUNNING),
        (S.BLOCKED, S.RUNNING),
        (S.RETRYING, S.RUNNING),
        (S.READY, S.SUCCEEDED),
        (S.RUNNING, S.BLOCKED),
        (S.BLOCKED, S.RETRYING),
        (S.SUCCEEDED, S.READY),
        (S.SUCCEEDED, S.FAILED),
        (S.FAILED, S.CANCELLED),
        (S.CANCELLED, S.RUNNING),
        (S.READY, S.BLOCKED),
    ],
)
def test_known_illegal_moves(before: TaskStatus | None, after: TaskStatus) -> None:
    assert not is_legal(before, after)


def test_actions_are_named() -> None:
    assert set(TRANSITIONS.values()) == ACTIONS


def test_no_self_loops_and_nothing_returns_to_nonexistence() -> None:
    for before, after in TRANSITIONS:
        assert before != after
        assert after is not None


def test_create_makes_only_waiting_or_doomed_tasks() -> None:
    # failed or cancelled: a parent already failed (by the child's on_parent_failure).
    # A handoff is a create claimed in its own transaction: the task is first seen running.
    created = {after for (before, after), action in TRANSITIONS.items() if action == "create"}
    assert created == {S.SCHEDULED, S.READY, S.BLOCKED, S.FAILED, S.CANCELLED}
    assert _successors(None) == created | {S.RUNNING}
    assert all(before is None for (before, _), action in TRANSITIONS.items() if action == "create")


def test_every_status_is_reachable_from_creation() -> None:
    seen: set[TaskStatus] = set()
    frontier = _successors(None)
    while frontier:
        seen |= frontier
        frontier = {nxt for status in frontier for nxt in _successors(status)} - seen
    assert seen == set(S)


def test_every_status_can_reach_a_terminal_one() -> None:
    for status in S:
        seen = {status}
        frontier = {status}
        while frontier:
            frontier = {nxt for s in frontier for nxt in _successors(s)} - seen
            seen |= frontier
        assert seen & TERMINAL_STATUSES, status


def test_terminal_statuses_are_left_only_by_a_replay() -> None:
    # A task's own replay makes it ready; a workflow's replay makes a node whose parents have
    # not all succeeded wait for them (blocked).
    for status in TERMINAL_STATUSES:
        for after in _successors(status):
            action = TRANSITIONS[(status, after)]
            assert (action, after) in {("retry", S.READY), ("replay", S.BLOCKED)}
    assert _successors(S.SUCCEEDED) == set()
    assert _successors(S.FAILED) == {S.READY, S.BLOCKED}
    assert _successors(S.CANCELLED) == {S.READY, S.BLOCKED}


def test_only_running_tasks_end_or_are_released_and_only_claims_start_them() -> None:
    for (before, after), action in TRANSITIONS.items():
        assert (action in ("complete", "release")) == (before is S.RUNNING), (before, after)
        assert (action in ("claim", "handoff")) == (after is S.RUNNING), (before, after)
    assert TRANSITIONS[(S.READY, S.RUNNING)] == "claim"
    # A handoff is a create and a claim in one transaction: a task first seen running.
    assert TRANSITIONS[(None, S.RUNNING)] == "handoff"
    ended = {a for (b, a), action in TRANSITIONS.items() if action == "complete"}
    released = {a for (b, a), action in TRANSITIONS.items() if action == "release"}
    assert ended == {S.SUCCEEDED, S.RETRYING, S.FAILED, S.CANCELLED}
    assert released == {S.READY, S.SCHEDULED}


@pytest.mark.parametrize(
    ("succeeded", "delay", "expected"),
    [
        (True, None, S.SUCCEEDED),
        (True, 5.0, S.SUCCEEDED),
        (False, 0.0, S.RETRYING),
        (False, 3.5, S.RETRYING),
        (False, None, S.FAILED),
    ],
)
def test_after_attempt_decides_an_edge_of_the_table(
    succeeded: bool, delay: float | None, expected: TaskStatus
) -> None:
    decided = after_attempt(succeeded, delay)
    assert decided is expected
    assert TRANSITIONS[(S.RUNNING, decided)] == "complete"
    overridden = after_cancel_request(decided)
    assert overridden is (S.SUCCEEDED if succeeded else S.CANCELLED)
    assert TRANSITIONS[(S.RUNNING, overridden)] == "complete"


@pytest.mark.parametrize(
    ("delay", "expected"), [(0.0, S.READY), (-1.0, S.READY), (0.5, S.SCHEDULED)]
)
def test_after_release_decides_a_release_edge(delay: float, expected: TaskStatus) -> None:
    assert after_release(delay) is expected
    assert TRANSITIONS[(S.RUNNING, expected)] == "release"


def test_cancel_reaches_every_waiting_status_but_not_running() -> None:
    cancellable = {before for (before, after), a in TRANSITIONS.items() if a == "cancel"}
    assert cancellable == {S.SCHEDULED, S.BLOCKED, S.READY, S.RETRYING}
    assert cancellable == set(PATCHABLE_STATUSES)
    assert all(after is S.CANCELLED for (_, after), a in TRANSITIONS.items() if a == "cancel")


def test_dependencies_move_only_blocked_tasks() -> None:
    moved = {(b, a) for (b, a), action in TRANSITIONS.items() if action == "dependencies"}
    assert moved == {(S.BLOCKED, S.SCHEDULED), (S.BLOCKED, S.READY), (S.BLOCKED, S.FAILED)}


def test_promoter_and_patch_edges() -> None:
    promoted = {b for (b, a), action in TRANSITIONS.items() if action == "promoter"}
    assert promoted == {S.SCHEDULED, S.RETRYING}
    assert all(a is S.READY for (_, a), act in TRANSITIONS.items() if act == "promoter")
    patched = {(b, a) for (b, a), action in TRANSITIONS.items() if action == "patch"}
    # scheduled → ready by a patch shares its edge with the promoter (one key per edge).
    assert patched == {(S.READY, S.SCHEDULED), (S.RETRYING, S.SCHEDULED)}
    assert (S.SCHEDULED, S.READY) in TRANSITIONS


def test_table_docstring_lists_every_edge() -> None:
    import duetime.states as states

    doc = states.__doc__ or ""
    rows = set()
    for line in doc.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in {s.value for s in S}:
            before = None if parts[0] == "(new)" else parts[0]
            if before is None or before in {s.value for s in S}:
                rows.add((None if before is None else S(before), S(parts[1])))
    assert rows == set(TRANSITIONS)
