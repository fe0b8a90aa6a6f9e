"""The contracts of tasks that know each other (:mod:`duetime.testing.conformance_workflows`),
run against every backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_workflows import *  # noqa: F403
