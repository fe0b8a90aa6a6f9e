"""duetime's exception tree. HTTP mapping lives only in :mod:`duetime.api.problems`.

::

    DuetimeError
     ├── ValidationError        bad input; names the offending field
     │    ├── PayloadTooLarge   a payload or result over the size limit
     │    └── BadCursor         a pagination cursor this server did not issue
     ├── NotFound               no such resource (or another tenant's)
     ├── Conflict               the resource is in a state that forbids the call
     │    ├── StaleLease        the lease was lost: expired, reclaimed or already acked
     │    └── UniqueHeld        a uniqueness window holds the key, its task already retired
     ├── Unauthorized           missing or unknown API key / admin token
     ├── StoreUnavailable       the store cannot be reached right now; try again
     │    └── StoreFull         the store is out of disk space: no writes until space returns
     ├── TooManyRequests        over a limit (names it); try again after ``retry_after`` seconds
     └── ConfigError            the configuration cannot work (e.g. dev mode on a public bind)
"""

from __future__ import annotations


class DuetimeError(Exception):
    """Base of every error duetime raises on purpose."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ValidationError(DuetimeError):
    """Input that cannot be accepted. ``field`` is a dotted path (``target.url``, ``tasks.3``)."""

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.field = field


class PayloadTooLarge(ValidationError):
    """A task's encoded payload (or a worker's result) is over ``Settings.max_payload_bytes``."""


class BadCursor(ValidationError):
    """A pagination cursor this server did not issue (tampered, or of another list): a 400
    naming ``cursor``, not a 422 — the request was not made by following the API."""

    def __init__(self, detail: str = "not a cursor this server returned") -> None:
        super().__init__(detail, field="cursor")


class NotFound(DuetimeError):
    """No such resource for this tenant."""


class Conflict(DuetimeError):
    """The resource's current state forbids the change; nothing was changed."""


class StaleLease(Conflict):
    """The lease is no longer current; the call was refused and changed nothing."""


class UniqueHeld(Conflict):
    """A create's uniqueness window holds its key until ``until``, and the window's task
    (``task_id``) has left the hot store (retention) since: nothing was created, and there is
    no task to answer with. A single create answers 200 with the task's id; in a batch it is a
    conflict (the batch creates nothing)."""

    def __init__(self, detail: str, task_id: str, until: object) -> None:
        super().__init__(detail)
        self.task_id = task_id
        self.until = until


class Unauthorized(DuetimeError):
    """Missing, malformed or unknown credentials."""


class Forbidden(DuetimeError):
    """The caller is known, but this server does not allow the call (e.g. admin calls in dev
    mode); nothing was changed."""


class StoreUnavailable(DuetimeError):
    """The store cannot be reached; accepted work is safe, retry later."""


class StoreFull(StoreUnavailable):
    """The store has no disk space left: it refuses writes until space is freed; accepted work
    is safe. A :class:`StoreUnavailable`, so every engine loop backs off and tries again."""


class TooManyRequests(DuetimeError):
    """The call is over a limit; nothing was done. ``limit`` names it (e.g.
    ``long_polls_per_tenant``); ``retry_after`` is when trying again may succeed, in seconds."""

    def __init__(self, detail: str, limit: str = "", retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.limit = limit
        self.retry_after = retry_after


class ConfigError(DuetimeError):
    """The configuration cannot work."""
