"""duetime's Python SDK: :class:`AsyncClient`, its blocking facade :class:`Client`, the typed
models they return and the typed errors they raise. Also importable as ``from duetime import
Client, AsyncClient``."""

from __future__ import annotations

from duetime.sdk.client import DEFAULT_URL, AsyncClient, Client
from duetime.sdk.errors import (
    ApiConflict,
    ApiError,
    ApiNotFound,
    ApiStaleLease,
    ApiUnauthorized,
    ApiUnavailable,
    ApiValidationError,
    TransportError,
)
from duetime.sdk.models import (
    ApiKeyCreated,
    Attempt,
    Page,
    RetryPolicy,
    RetrySpec,
    SigningSecret,
    Task,
    TaskSpec,
    Tenant,
    TenantCreated,
    http_target,
    worker_target,
)

__all__ = [
    "DEFAULT_URL",
    "ApiConflict",
    "ApiError",
    "ApiKeyCreated",
    "ApiNotFound",
    "ApiStaleLease",
    "ApiUnauthorized",
    "ApiUnavailable",
    "ApiValidationError",
    "AsyncClient",
    "Attempt",
    "Client",
    "Page",
    "RetryPolicy",
    "RetrySpec",
    "SigningSecret",
    "Task",
    "TaskSpec",
    "Tenant",
    "TenantCreated",
    "TransportError",
    "http_target",
    "worker_target",
]
