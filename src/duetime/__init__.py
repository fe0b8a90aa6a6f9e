"""duetime: a durable, distributed task scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from duetime.version import __version__

__all__ = [
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

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient, Client
    from duetime.sdk.handles import Retry, TaskHandle
    from duetime.sdk.worker import Job, NonRetryable, Worker, WorkerConfig

_LAZY = {
    "AsyncClient": "duetime.sdk.client",
    "Client": "duetime.sdk.client",
    "Job": "duetime.sdk.worker",
    "NonRetryable": "duetime.sdk.worker",
    "Retry": "duetime.sdk.handles",
    "TaskHandle": "duetime.sdk.handles",
    "Worker": "duetime.sdk.worker",
    "WorkerConfig": "duetime.sdk.worker",
}


def __getattr__(name: str) -> Any:
    # The SDK pulls in httpx and pydantic; import it only when asked for, so the server, the
    # engine and `import duetime.types` stay lean.
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'duetime' has no attribute {name!r}")
