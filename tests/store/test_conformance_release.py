"""The lease hand-back contracts (:mod:`duetime.testing.conformance_release`), run against every
backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_release import *  # noqa: F403
