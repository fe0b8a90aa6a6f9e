"""The named credential and sealed-row store contracts
(:mod:`duetime.testing.conformance_credentials`), run against every backend through the ``store``
fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_credentials import *  # noqa: F403
