"""The store's rules, written once for both backends.

A store method that is not on the hot path is a *plan*: a generator that yields statements
(:mod:`.plan`) by name and receives their results, so the rule — which rows to read, what to
decide, what to write — lives here once, while each backend only runs statements: SQLite on its
database thread, PostgreSQL over asyncpg (``store/<backend>/driver.py``). The SQL text of each
named statement is per dialect, in the backends' ``.sql`` files; the rows it returns become
duetime values in :mod:`.rows`, through a small per-backend :class:`~.plan.Decode`.

The hot path (create, claim, complete, promote, heartbeat) stays per backend where a measurement
says so: ``docs/adr/0005-store-core.md``.
"""
