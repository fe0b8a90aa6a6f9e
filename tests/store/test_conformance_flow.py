"""The flow-control store contracts (:mod:`duetime.testing.conformance_flow`), run against every
backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_flow import *  # noqa: F403
