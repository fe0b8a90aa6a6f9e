"""A node's wiring and processes: what puts the layers below together into a running node.

* :mod:`.wiring` — the pieces every process of a node builds alike: logging and the event loop,
  the store (opened, migrated, timed), the deliverers, the create-time target check.
* :mod:`.server` — ``duetime serve``: the HTTP API and the engine of one node, in one process.
* :mod:`.processes` — the node's extra dispatcher processes (PostgreSQL).

Nothing below this package imports it (see "Layers" in CONTRIBUTING.md).
"""
