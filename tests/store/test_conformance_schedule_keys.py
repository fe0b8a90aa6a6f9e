"""Declarative schedule keys against every backend (the suite lives in
:mod:`duetime.testing.conformance_schedule_keys`; ``store`` and ``clock`` come from conftest)."""

from __future__ import annotations

from duetime.testing.conformance_schedule_keys import *  # noqa: F403
