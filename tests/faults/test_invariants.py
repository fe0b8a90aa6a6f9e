"""The invariant checker itself: each broken invariant is reported, and a clean history is not."""

from __future__ import annotations

from duetime.testing.invariants import AttemptRow, TaskRow, check


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
