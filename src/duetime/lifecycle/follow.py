"""What a create asks to follow a task's end (SPEC §3 "Workflows", "Callbacks"): the task's
``on_parent_failure``, whether a push delivery sends its parents' outcomes
(``parents_in_body``), and its callbacks, as the :class:`~duetime.types.Follow` the store keeps
with it. A callback's target is checked like the task's own (the server's guard; a broker
URL's secret sealed), and named by its field path (``on_failure.target.url``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from duetime.types import Callback, CallbackKind, Follow, ParentFailure, RetryPolicy

CheckTarget = Callable[[Mapping[str, Any], str], Mapping[str, Any]]
"""The create's target check: ``(target, field prefix) -> target as stored``."""


class CallbackSpec(Protocol):
    """A callback as a create request asks for it (the API's ``CallbackIn``)."""

    @property
    def queue(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def timeout_seconds(self) -> float | None: ...

    def target_fields(self) -> dict[str, Any]:
        """The target as a JSON object."""

    def retry_policy(self) -> RetryPolicy | None:
        """The retry policy asked for (None: the default)."""


class FollowSpec(Protocol):
    """The fields of a create request that follow its task's end."""

    @property
    def on_parent_failure(self) -> str: ...
    @property
    def parents_in_body(self) -> bool: ...

    def callbacks(self) -> Mapping[str, CallbackSpec]:
        """The callbacks asked for, by kind."""


def follow_of(spec: FollowSpec, check: CheckTarget | None, prefix: str = "") -> Follow | None:
    """The :class:`~duetime.types.Follow` ``spec`` asks for (None: nothing beyond today's
    rule, so the hot path creates the task). ``check`` is run on each callback's target."""
    asked_for = spec.callbacks()
    if spec.on_parent_failure == "fail" and not spec.parents_in_body and not asked_for:
        return None  # nearly every create: the hot path makes it
    policy = ParentFailure(spec.on_parent_failure)
    callbacks: dict[CallbackKind, Callback] = {}
    for kind, asked in asked_for.items():
        target: Mapping[str, Any] = asked.target_fields()
        if check is not None:
            target = dict(check(target, f"{prefix}{kind}."))
        callbacks[CallbackKind(kind)] = Callback(
            target=target,
            queue=asked.queue,
            name=asked.name,
            retry=asked.retry_policy(),
            timeout_seconds=asked.timeout_seconds,
        )
    return Follow(
        on_parent_failure=policy, parents_in_body=spec.parents_in_body, callbacks=callbacks
    )
