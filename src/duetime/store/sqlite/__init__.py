"""The SQLite store, duetime's embedded default: see :mod:`duetime.store.sqlite.backend`."""
