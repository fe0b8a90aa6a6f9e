"""The queue and pull-worker store contracts (:mod:`duetime.testing.conformance_queues`), run
against every backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_queues import *  # noqa: F403
