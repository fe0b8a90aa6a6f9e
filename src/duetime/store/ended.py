"""The ends of tasks, as a store tells them: the one wake-up every wait for a task, a workflow or
a task's children shares (:mod:`duetime.lifecycle.waits`).

After a commit that ended tasks (a completion, a cancel, a parent's failure reaching its
children), a store calls :meth:`EndedFeed.publish` with their ids — only while someone may want
them (:attr:`EndedFeed.wanted`), so a node where nobody waits pays nothing for waits: not even
the list of ids. Who listens (:meth:`EndedFeed.listen`) is this node's wait registry; on
PostgreSQL the feed also carries ids across nodes (:mod:`duetime.store.postgres.ends`), but only
to nodes that said they wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

log = logging.getLogger("duetime.store")

Heard = Callable[[Sequence[str] | None], None]
"""Told the ids of tasks that ended; None: some may have ended unseen (a lost connection), so
every wait should read its tasks again."""


class Remote:
    """What a feed needs of a transport between nodes (PostgreSQL's :class:`~duetime.store.
    postgres.ends.PgEnds`): whether another node waits, a way to send it ids, and a way to say
    this node waits."""

    def others_wait(self) -> bool:
        raise NotImplementedError

    def send(self, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def waiting(self) -> None:
        raise NotImplementedError


class EndedFeed:
    """Ids of ended tasks, from this store's commits and (with a :class:`Remote`) other
    nodes'. One per store instance; never blocks and never raises to the store."""

    def __init__(self, remote: Remote | None = None) -> None:
        self.remote = remote
        self.waits = 0
        """Waits open on this node (kept by the registry that listens)."""
        self._heard: Heard | None = None

    def listen(self, heard: Heard) -> None:
        """Send every later publication (local or remote) to ``heard`` (one listener)."""
        self._heard = heard

    @property
    def wanted(self) -> bool:
        """Whether a publication reaches anyone: a wait on this node, or another node that
        said it waits. Callers test this before gathering ids."""
        return self.waits > 0 or (self.remote is not None and self.remote.others_wait())

    def publish(self, ids: Iterable[str]) -> None:
        """Tasks ``ids`` ended in a commit of this store (call after the commit)."""
        found = list(ids)
        if not found:
            return
        if self.waits > 0:
            self.heard(found)
        remote = self.remote
        if remote is not None and remote.others_wait():
            remote.send(found)

    def heard(self, ids: Sequence[str] | None) -> None:
        """Ids that ended (None: unknown ones may have, see :data:`Heard`), from this node or
        another."""
        heard = self._heard
        if heard is None:
            return
        try:
            heard(ids)
        except Exception:  # a listener's bug must not break the store's commit path
            log.exception("an ended-task listener failed")

    def waiting(self) -> None:
        """A wait is open on this node: tell the other nodes (at most once a second)."""
        if self.remote is not None:
            self.remote.waiting()
