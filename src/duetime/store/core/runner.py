"""The one thing the core's method mixins need from a backend: run a plan in a transaction."""

from __future__ import annotations

from typing import TypeVar

from duetime.store.core.plan import Plan

T = TypeVar("T")


class Runs:
    """Base of the core's method mixins; each backend's store class implements :meth:`_run`."""

    async def _run(
        self,
        plan: Plan[T],
        *,
        write: bool = False,
        long: bool = False,
        snapshot: bool = False,
        one: bool = False,
    ) -> T:
        """Run ``plan`` to its end in one transaction (a write transaction when ``write``;
        the audit trail names the caller's actor then) and fire the wake-ups it asked for after
        the commit. ``long`` lifts the per-statement timeout (migrations). ``snapshot``: a read
        that needs one transaction on PostgreSQL too (whose reads otherwise run statement by
        statement), e.g. for a transaction-local setting. ``one``: the plan runs a single
        statement, atomic by itself (the engine's hot path, no audit actor), so PostgreSQL skips
        BEGIN/COMMIT. Raises ``StoreUnavailable`` when the backend cannot be reached."""
        raise NotImplementedError

    def _limits_changed(self) -> None:
        """After a change of queue settings or tenant quotas commits (PostgreSQL drops its
        cache of limited queues and tenants, so claims on this node follow at once)."""
