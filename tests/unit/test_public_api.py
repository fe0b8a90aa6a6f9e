"""The curated public API: what users import. A change here is a change of contract."""

from __future__ import annotations

import duetime
import duetime.sdk


def test_top_level_exports() -> None:
    assert duetime.__all__ == [
        "AsyncClient",
        "Client",
        "Job",
        "NonRetryable",
        "Retry",
        "TaskHandle",
        "Worker",
        "WorkerConfig",
        "__version__",
    ]
    for name in duetime.__all__:
        assert getattr(duetime, name) is not None


def test_sdk_exports_resolve_and_are_sorted() -> None:
    names = [n for n in duetime.sdk.__all__ if n != "DEFAULT_URL"]
    assert names == sorted(names, key=lambda n: (n[0].islower(), n))
    for name in duetime.sdk.__all__:
        assert getattr(duetime.sdk, name) is not None
    assert duetime.Client is duetime.sdk.Client
    assert duetime.Worker is duetime.sdk.Worker
