"""The due horizon every :class:`~duetime.store.protocols.Signal` carries (mixed in by each).

A create of a scheduled task must wake the leader's promoter only when the task falls due before
the promoter wakes anyway. The promoter writes that time to its node's ``due_signal.horizon``
before it sleeps and clears it when it wakes; :meth:`DueHorizon.notify_due` skips the wake-up
(and on PostgreSQL the ``NOTIFY``) for a task due at or after it. Without this, every scheduled
create cost the node a promoter round and its reads (three statements, about a third of a single
create's work: docs/benchmarks.md). A node whose promoter does not lead has no horizon, so its
creates still wake the leader wherever it runs.
"""

from __future__ import annotations

from datetime import datetime


class DueHorizon:
    horizon: datetime | None = None
    """Tasks due at or after this need no wake-up (None: unknown, wake for every one)."""

    def notify(self, pulls_only: bool = False) -> None:
        raise NotImplementedError

    def notify_due(self, at: datetime) -> None:
        """:meth:`notify` for a task due at ``at``, unless the promoter wakes by then anyway."""
        horizon = self.horizon
        if horizon is None or at < horizon:
            self.notify()
