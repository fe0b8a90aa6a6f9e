"""The transition table: ``is_legal`` and the table's own sanity (every state reachable, terminal
states left only by a replay, the doc's rules about who moves a task)."""

from __future__ import annotations

import itertools

import pytest

from duetime.states import TRANSITIONS, is_legal
from duetime.types import PATCHABLE_STATUSES, TERMINAL_STATUSES, TaskStatus

S = TaskStatus
ACTIONS = {"create", "dependencies", "promoter", "patch", "claim", "complete", "cancel", "retry"}


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
        (None, S.RUNNING),
        (None, S.SUCCEEDED),
        (None, S.CANCELLED),
        (None, S.RETRYING),
        (S.SCHEDULED, S.RUNNING),
        (S.BLOCKED, S.RUNNING),
        (S.RETRYING, S.RUNNING),
        (S.READY, S.SUCCEEDED),
        (S.RUNNING, S.READY),
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
    assert _successors(None) == {S.SCHEDULED, S.READY, S.BLOCKED, S.FAILED}
    assert all(TRANSITIONS[(None, after)] == "create" for after in _successors(None))


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
    for status in TERMINAL_STATUSES:
        for after in _successors(status):
            assert TRANSITIONS[(status, after)] == "retry"
            assert after is S.READY
    assert _successors(S.SUCCEEDED) == set()
    assert _successors(S.FAILED) == {S.READY}
    assert _successors(S.CANCELLED) == {S.READY}


def test_only_running_tasks_complete_and_only_claims_start_them() -> None:
    for (before, after), action in TRANSITIONS.items():
        assert (action == "complete") == (before is S.RUNNING), (before, after)
        assert (action == "claim") == (after is S.RUNNING), (before, after)
    assert TRANSITIONS[(S.READY, S.RUNNING)] == "claim"
    assert _successors(S.RUNNING) == {S.SUCCEEDED, S.RETRYING, S.FAILED, S.CANCELLED}


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
