"""duetime: a durable, distributed task scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["AsyncClient", "Client", "__version__"]

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient, Client


def __getattr__(name: str) -> Any:
    # The SDK pulls in httpx and pydantic; import it only when asked for, so the server, the
    # engine and `import duetime.types` stay lean.
    if name in ("AsyncClient", "Client"):
        from duetime.sdk import client

        return getattr(client, name)
    raise AttributeError(f"module 'duetime' has no attribute {name!r}")
