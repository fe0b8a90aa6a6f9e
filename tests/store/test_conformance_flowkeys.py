"""The keyed flow-control store contracts (:mod:`duetime.testing.conformance_flowkeys`), run
against every backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_flowkeys import *  # noqa: F403
