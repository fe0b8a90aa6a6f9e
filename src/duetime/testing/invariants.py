"""The invariants a fault must never break, checked from the database after the fault healed.

Read the ``tasks`` and ``attempts`` tables of either store straight from the database (not
through the API a fault may have bent), then check, for the tasks a test had accepted:

- every accepted task exists and ends in exactly one terminal state (``succeeded``, ``failed``,
  ``cancelled``) — none lost, none stuck;
- no completion recorded twice: at most one ``succeeded`` attempt per task;
- no attempt without an end: every attempt row has ``finished_at``, attempt numbers run 1..n
  without a gap, and ``tasks.attempts`` counts exactly the attempts recorded (a claim whose end
  was never written would leave a gap or a count ahead of the rows);
- every duplicate delivery (a target saw one task more than once) is explained: a delivery of a
  later attempt by an earlier attempt that ended without the target's success reaching the store
  (``lease_expired``, ``timed_out`` or ``failed`` — at least ``distinct attempts seen - 1`` of
  them); a second delivery of the *same* attempt only as the webhook client's single resend on a
  reused keep-alive connection that closed without answering (byte-identical: same
  ``webhook-id``, same ``duetime-attempt``; :mod:`duetime.http1`), so at most once per
  attempt, counted apart as ``resent``. No target may see an attempt the store never claimed;
- the audit trail (SPEC §8) holds every task's story, once: one ``attempt`` record per attempt
  row, by number; ``task`` records that chain — in id order (ids are drawn as the records are
  written, and a task's changes are serialized by its row lock), the first is the create
  (``from_status`` NULL) and each starts where the one before ended — up to the task's status;
  no record id twice. On PostgreSQL the records still waiting in ``history_pending`` (written
  behind, ADR 0008) count as written.

:func:`check` returns a :class:`Report` with the figures ``docs/reliability.md`` tabulates;
:meth:`Report.assert_ok` fails with every violation listed.
"""

from __future__ import annotations

import collections
import itertools
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from duetime.store.postgres.schema import connect as pg_connect

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
UNSUCCESSFUL = frozenset({"lease_expired", "timed_out", "failed"})


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    status: str
    attempts: int
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptRow:
    task_id: str
    number: int
    outcome: str
    finished: bool


@dataclass(frozen=True, slots=True)
class HistoryRow:
    task_id: str
    id: int
    kind: str
    from_status: str | None
    to_status: str | None
    attempt: int | None


@dataclass(slots=True)
class Report:
    """What :func:`check` found: figures, and every broken invariant in ``violations``."""

    tasks: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    attempts: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    deliveries: int = 0
    duplicates: int = 0
    explained: int = 0
    resent: int = 0
    lost: int = 0
    audit_records: int = 0
    """Audit records of the accepted tasks (0 when the check was not given the history)."""
    failures: dict[str, int] = field(default_factory=dict)
    """The ``last_error`` of tasks that ended ``failed``, counted (to tell a fault from a bug)."""
    violations: list[str] = field(default_factory=list)

    def assert_ok(self) -> None:
        if self.violations:
            shown = "\n  ".join(self.violations[:30])
            more = len(self.violations) - 30
            raise AssertionError(
                f"{len(self.violations)} invariant violations ({self.summary()}):\n  {shown}"
                + (f"\n  ... and {more} more" if more > 0 else "")
            )

    def summary(self) -> str:
        """One line for logs and for ``docs/reliability.md``."""
        return (
            f"tasks={self.tasks} statuses={dict(sorted(self.statuses.items()))} "
            f"attempts={self.attempts} outcomes={dict(sorted(self.outcomes.items()))} "
            f"deliveries={self.deliveries} duplicates={self.duplicates} "
            f"explained={self.explained} resent={self.resent} lost={self.lost}"
            + (f" failures={self.failures}" if self.failures else "")
        )


class Stored(NamedTuple):
    """What the checks read of a store: every task, attempt and task audit record."""

    tasks: list[TaskRow]
    attempts: list[AttemptRow]
    history: list[HistoryRow]


async def read_postgres(url: str) -> Stored:
    """Every task, attempt and task audit record of the PostgreSQL database at ``url``, the
    records still waiting in ``history_pending`` included."""
    conn = await pg_connect(url, timeout=10)
    try:
        tasks = await conn.fetch("SELECT id::text AS id, status, attempts, last_error FROM tasks")
        attempts = await conn.fetch(
            "SELECT task_id::text AS task_id, number, outcome, finished_at IS NOT NULL AS done "
            "FROM attempts"
        )
        history = await conn.fetch(
            "SELECT task_id::text, id, kind, from_status, to_status, attempt FROM history "
            "WHERE task_id IS NOT NULL UNION ALL "
            "SELECT h.task_id::text, h.id, h.kind, h.from_status, h.to_status, h.attempt "
            "FROM history_pending p CROSS JOIN LATERAL unnest(p.rows) AS h "
            "WHERE h.task_id IS NOT NULL"
        )
    finally:
        await conn.close()
    return Stored(
        [TaskRow(r["id"], r["status"], r["attempts"], r["last_error"]) for r in tasks],
        [AttemptRow(r["task_id"], r["number"], r["outcome"], r["done"]) for r in attempts],
        [HistoryRow(*r) for r in history],
    )


def read_sqlite(path: str) -> Stored:
    """Every task, attempt and task audit record of the SQLite file at ``path`` (opened
    read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        tasks = conn.execute("SELECT id, status, attempts, last_error FROM tasks").fetchall()
        attempts = conn.execute(
            "SELECT task_id, number, outcome, finished_at IS NOT NULL FROM attempts"
        ).fetchall()
        history = conn.execute(
            "SELECT task_id, id, kind, from_status, to_status, attempt FROM history "
            "WHERE task_id IS NOT NULL"
        ).fetchall()
    finally:
        conn.close()
    return Stored(
        [TaskRow(str(i), str(s), int(a), e) for i, s, a, e in tasks],
        [AttemptRow(str(t), int(n), str(o), bool(d)) for t, n, o, d in attempts],
        [HistoryRow(str(t), int(i), k, f, to, a) for t, i, k, f, to, a in history],
    )


def check(
    accepted: Iterable[str],
    tasks: Iterable[TaskRow],
    attempts: Iterable[AttemptRow],
    deliveries: Mapping[str, Sequence[int]] | None = None,
    history: Iterable[HistoryRow] | None = None,
) -> Report:
    """Check the invariants for the ``accepted`` task ids against the stored rows.

    ``deliveries`` maps a task id to the attempt numbers its target saw, one per delivery (a
    receiver's or a worker's record); tasks it does not name are not checked for duplicates. Ids
    in ``deliveries`` that were never accepted are violations too (a delivery nobody asked for).
    ``history``, when given, is checked as the audit trail of the accepted tasks.
    """
    wanted = set(accepted)
    by_id = {t.id: t for t in tasks}
    per_task: dict[str, list[AttemptRow]] = collections.defaultdict(list)
    for a in attempts:
        if a.task_id in wanted:
            per_task[a.task_id].append(a)
    report = Report(tasks=len(wanted))
    bad = report.violations
    statuses: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    for task_id in sorted(wanted):
        task = by_id.get(task_id)
        if task is None:
            report.lost += 1
            bad.append(f"{task_id}: accepted but not stored")
            continue
        statuses[task.status] += 1
        if task.status == "failed":
            failures[(task.last_error or "")[:200]] += 1
        if task.status not in TERMINAL:
            report.lost += 1
            bad.append(f"{task_id}: ended in {task.status!r}, not a terminal state")
        rows = sorted(per_task.get(task_id, []), key=lambda a: a.number)
        outcomes.update(a.outcome for a in rows)
        report.attempts += len(rows)
        if sum(a.outcome == "succeeded" for a in rows) > 1:
            bad.append(f"{task_id}: completion recorded twice {[a.outcome for a in rows]}")
        if task.status == "succeeded" and not any(a.outcome == "succeeded" for a in rows):
            bad.append(f"{task_id}: succeeded without a succeeded attempt")
        if [a.number for a in rows] != list(range(1, len(rows) + 1)):
            bad.append(f"{task_id}: attempt numbers {[a.number for a in rows]} have a gap")
        if task.attempts != len(rows):
            bad.append(f"{task_id}: {task.attempts} attempts claimed, {len(rows)} recorded")
        if not all(a.finished for a in rows):
            bad.append(f"{task_id}: an attempt without an end")
    for task_id, seen in (deliveries or {}).items():
        report.deliveries += len(seen)
        if task_id not in wanted:
            bad.append(f"{task_id}: delivered but never accepted")
            continue
        _explain(report, task_id, seen, per_task.get(task_id, []), by_id.get(task_id))
    if history is not None:
        _audit(report, wanted, by_id, per_task, history)
    report.statuses = dict(statuses)
    report.outcomes = dict(outcomes)
    report.failures = dict(failures.most_common(5))
    return report


def _explain(
    report: Report,
    task_id: str,
    seen: Sequence[int],
    rows: Sequence[AttemptRow],
    task: TaskRow | None,
) -> None:
    """Account for the deliveries ``seen`` of one task (attempt numbers) against its ``rows``."""
    if len(seen) <= 1:
        return
    report.duplicates += len(seen) - 1
    per_attempt = collections.Counter(seen)
    resent = sum(n - 1 for n in per_attempt.values())
    if any(n > 2 for n in per_attempt.values()):
        report.violations.append(f"{task_id}: one attempt delivered 3+ times {sorted(seen)}")
    report.resent += resent
    later = len(per_attempt) - 1
    ended_badly = sum(a.outcome in UNSUCCESSFUL for a in rows)
    report.explained += min(later, ended_badly)
    if ended_badly < later:
        report.violations.append(
            f"{task_id}: attempts {sorted(seen)} delivered, only {ended_badly} ended "
            f"unsuccessfully {[a.outcome for a in rows]}"
        )
    if task is not None and max(seen) > task.attempts:
        report.violations.append(
            f"{task_id}: attempt {max(seen)} delivered, {task.attempts} claimed"
        )


def _audit(
    report: Report,
    wanted: set[str],
    by_id: Mapping[str, TaskRow],
    attempts: Mapping[str, Sequence[AttemptRow]],
    history: Iterable[HistoryRow],
) -> None:
    """The audit-trail invariants (module docstring) for the ``wanted`` tasks."""
    bad = report.violations
    ids: collections.Counter[int] = collections.Counter()
    per_task: dict[str, list[HistoryRow]] = collections.defaultdict(list)
    for row in history:
        ids[row.id] += 1
        if row.task_id in wanted:
            per_task[row.task_id].append(row)
    bad.extend(f"audit record {i} written {n} times" for i, n in ids.items() if n > 1)
    for task_id in sorted(wanted):
        task = by_id.get(task_id)
        if task is None:
            continue  # already reported lost
        rows = sorted(per_task.get(task_id, []), key=lambda r: r.id)
        report.audit_records += len(rows)
        recorded = [r.attempt for r in rows if r.kind == "attempt"]
        stored = sorted(a.number for a in attempts.get(task_id, []))
        if sorted(n or 0 for n in recorded) != stored:
            bad.append(f"{task_id}: attempts {stored} stored, {recorded} in the audit trail")
        chain = [(r.from_status, r.to_status) for r in rows if r.kind == "task"]
        if not chain or chain[0][0] is not None:
            bad.append(f"{task_id}: no create record first in the audit trail {chain}")
        elif any(after[0] != before[1] for before, after in itertools.pairwise(chain)):
            bad.append(f"{task_id}: audit trail does not chain {chain}")
        elif chain[-1][1] != task.status:
            bad.append(f"{task_id}: audit trail ends in {chain[-1][1]!r}, task in {task.status!r}")
