"""The tenant and quota store contracts (:mod:`duetime.testing.conformance_tenants`), run
against every backend through the ``store`` fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_tenants import *  # noqa: F403
