"""The signing key, client certificate, held payload and session store contracts
(:mod:`duetime.testing.conformance_identity`), run against every backend through the ``store``
fixture of ``tests/conftest.py``."""

from __future__ import annotations

from duetime.testing.conformance_identity import *  # noqa: F403
