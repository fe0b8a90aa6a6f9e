"""The invariant checker itself: each broken invariant is reported, and a clean history is not."""

from __future__ import annotations

from duetime.testing.invariants import AttemptRow, HistoryRow, TaskRow, check


def _attempts(task_id: str, *outcomes: str) -> list[AttemptRow]:
    return [AttemptRow(task_id, n, o, True) for n, o in enumerate(outcomes, 1)]


def test_a_clean_history_passes_with_its_figures() -> None:
    tasks = [TaskRow("t1", "succeeded", 2), TaskRow("t2", "failed", 1)]
    rows = _attempts("t1", "lease_expired", "succeeded") + _attempts("t2", "failed")
    report = check(["t1", "t2"], tasks, rows, {"t1": [1, 2], "t2": [1]})
    report.assert_ok()
    assert (report.tasks, report.duplicates, report.explained, report.resent, report.lost) == (
        2,
        1,
        1,
        0,
        0,
    )
    assert report.statuses == {"succeeded": 1, "failed": 1}


def test_every_broken_invariant_is_named() -> None:
    tasks = [
        TaskRow("stuck", "running", 1),
        TaskRow("twice", "succeeded", 2),
        TaskRow("gap", "failed", 2),
        TaskRow("unended", "failed", 1),
        TaskRow("dup", "succeeded", 1),
        TaskRow("resent3", "succeeded", 1),
    ]
    rows = [
        *_attempts("twice", "succeeded", "succeeded"),
        AttemptRow("gap", 1, "failed", True),
        AttemptRow("gap", 3, "failed", True),
        AttemptRow("unended", 1, "failed", False),
        *_attempts("dup", "succeeded"),
        *_attempts("resent3", "succeeded"),
    ]
    deliveries = {"dup": [1, 2], "resent3": [1, 1, 1], "stranger": [1]}
    accepted = ["lost", "stuck", "twice", "gap", "unended", "dup", "resent3"]
    report = check(accepted, tasks, rows, deliveries)
    text = "\n".join(report.violations)
    assert report.lost == 2
    for needle in (
        "lost: accepted but not stored",
        "stuck: ended in 'running'",
        "twice: completion recorded twice",
        "gap: attempt numbers [1, 3] have a gap",
        "unended: an attempt without an end",
        "dup: attempts [1, 2] delivered, only 0 ended unsuccessfully",
        "dup: attempt 2 delivered, 1 claimed",
        "resent3: one attempt delivered 3+ times",
        "stranger: delivered but never accepted",
    ):
        assert needle in text, f"{needle!r} not reported in:\n{text}"


def _story(task_id: str, first_id: int, *statuses: str, attempts: int = 0) -> list[HistoryRow]:
    """Audit records of a task going through ``statuses`` (the first its create), then one
    record per attempt."""
    rows = [
        HistoryRow(task_id, first_id + i, "task", before, after, None)
        for i, (before, after) in enumerate(zip((None, *statuses), statuses, strict=False))
    ]
    return rows + [
        HistoryRow(task_id, first_id + len(rows) + n, "attempt", None, None, n)
        for n in range(1, attempts + 1)
    ]


def test_a_whole_audit_trail_passes_and_is_counted() -> None:
    tasks = [TaskRow("t1", "succeeded", 2)]
    rows = _attempts("t1", "lease_expired", "succeeded")
    story = _story("t1", 10, "ready", "running", "retrying", "ready", "running", "succeeded")
    # Another task's attempt records are not this one's.
    report = check(["t1"], tasks, rows, history=story + _story("other", 40, "ready", attempts=2))
    assert report.violations == ["t1: attempts [1, 2] stored, [] in the audit trail"]
    full = story + [HistoryRow("t1", 30 + n, "attempt", None, None, n) for n in (1, 2)]
    report = check(["t1"], tasks, rows, history=full)
    report.assert_ok()
    assert report.audit_records == 8


def test_every_broken_audit_invariant_is_named() -> None:
    tasks = [
        TaskRow("nocreate", "succeeded", 0),
        TaskRow("broken", "succeeded", 0),
        TaskRow("short", "succeeded", 0),
        TaskRow("twice", "failed", 1),
    ]
    history = [
        *_story("nocreate", 1, "ready")[1:],
        HistoryRow("nocreate", 2, "task", "ready", "succeeded", None),
        *_story("broken", 10, "ready", "running"),
        HistoryRow("broken", 13, "task", "ready", "succeeded", None),
        *_story("short", 20, "ready", "running"),
        *_story("twice", 30, "ready", "running", "failed", attempts=1),
        HistoryRow("twice", 34, "attempt", None, None, 1),  # the same record again
    ]
    report = check([t.id for t in tasks], tasks, _attempts("twice", "failed"), history=history)
    text = "\n".join(report.violations)
    for needle in (
        "nocreate: no create record first",
        "broken: audit trail does not chain",
        "short: audit trail ends in 'running', task in 'succeeded'",
        "twice: attempts [1] stored, [1, 1] in the audit trail",
        "audit record 34 written 2 times",
    ):
        assert needle in text, f"{needle!r} not reported in:\n{text}"
