"""Building the tasks of one create call (``duetime.lifecycle.create.TaskBuilder``): each
distinct target is checked once per call, each task gets its own copy of it, and a refusal names
the first item that has it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from duetime.api.schemas import TaskBatchCreate
from duetime.errors import ValidationError
from duetime.lifecycle.create import TaskBuilder

NOW = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)


class _Clock:
    async def now(self) -> datetime:
        return NOW


def _specs(items: list[dict[str, Any]]) -> list[Any]:
    return list(TaskBatchCreate.model_validate({"tasks": items}).tasks)


def test_a_batch_checks_each_distinct_target_once() -> None:
    """Items mostly share a target: the network guard runs once per distinct one, and each task
    still gets its own copy of the target as the guard left it."""
    seen: list[Any] = []

    def check(target: Any) -> Any:
        seen.append(dict(target))
        return {**target, "checked": len(seen)}

    hook = {"type": "http", "url": "https://example.com/h"}
    other = {"type": "http", "url": "https://example.com/h", "headers": {"X-A": "1"}}
    items = [{"target": hook}, {"target": {"type": "worker"}}, {"target": hook}, {"target": other}]
    items.append({"target": hook})
    builder = TaskBuilder(64, validate_target=check)
    built = asyncio.run(builder.new_tasks(_Clock(), "t", _specs(items), batch=True))
    assert len(seen) == 3  # the hook, the worker target, the hook with a header
    assert [t.target["checked"] for t in built] == [1, 2, 1, 3, 1]
    assert built[0].target == built[2].target and built[0].target is not built[2].target
    # A target the check changed is fingerprinted as stored, the same for every task sharing it.
    assert built[0].request_hash == built[2].request_hash == built[4].request_hash


def test_a_target_the_check_leaves_alone_is_fingerprinted_as_given() -> None:
    """The memo keeps what a lone check tells the fingerprint: whether the check changed the
    target. A repeat of a single create then matches a batch item of the same fields."""
    builder = TaskBuilder(64, validate_target=lambda target: None)
    item = {"target": {"type": "http", "url": "https://example.com/h"}, "idempotency_key": "k"}
    (single,) = asyncio.run(builder.new_tasks(_Clock(), "t", _specs([item]), batch=False))
    first, again = asyncio.run(builder.new_tasks(_Clock(), "t", _specs([item, item]), batch=True))
    assert single.request_hash == first.request_hash == again.request_hash


def test_a_refused_target_names_its_first_item() -> None:
    def refuse_private(target: Any) -> None:
        if "internal" in str(target.get("url", "")):
            raise ValueError("private address")

    items = [{"target": {"type": "worker"}}] + [
        {"target": {"type": "http", "url": "http://internal/h"}}
    ] * 2
    builder = TaskBuilder(64, validate_target=refuse_private)
    try:
        asyncio.run(builder.new_tasks(_Clock(), "t", _specs(items), batch=True))
    except ValidationError as exc:
        assert (exc.field, exc.detail) == ("tasks.1.target.url", "private address")
    else:
        raise AssertionError("the private target was accepted")
