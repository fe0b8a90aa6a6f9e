"""History, retention and audit (SPEC §8): the backend-neutral rules both stores and the
engine's maintenance service use.

* :mod:`.retention` — how long finished tasks stay in the hot store (per queue, with defaults).
* :mod:`.events` — what an audit/history record is, the query filter, the cursor.
* :mod:`.actor` — who is making the current change (API key, node, worker), as a context variable
  the stores read when they record an event.
"""
