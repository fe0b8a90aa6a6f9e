"""The schedule contracts of the store conformance suite, against every backend (the suite lives
in :mod:`duetime.testing.conformance_schedules`; ``store`` and ``clock`` come from conftest)."""

from __future__ import annotations

from duetime.testing.conformance_schedules import *  # noqa: F403
