"""Request models → :mod:`duetime.types` values, with the checks that need the server's settings.

Errors are :class:`duetime.errors.ValidationError` naming the field by its dotted path (``payload``,
``tasks.3.payload``); :mod:`duetime.api.problems` turns them into 422 (413 for a payload over the
size limit).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson
from pydantic_core import PydanticCustomError

from duetime.api.batch_body import Plain
from duetime.api.fields import parse_rfc3339
from duetime.api.idempotency import request_hash
from duetime.api.problems import PayloadTooLarge
from duetime.api.schemas import TaskCreate, TaskPatchIn
from duetime.errors import ValidationError
from duetime.ids import is_uuid, uuid_text
from duetime.store.protocols import StoreClock
from duetime.text import check
from duetime.types import NewTask, RetryPolicy, TaskFilter, TaskPatch, TaskStatus

TargetCheck = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""Hook run on every target at create time; raises ``ValidationError`` (or ``ValueError``), and
returns the target to store when that differs from the one given (a broker URL's secret sealed),
else None."""

DEFAULT_RETRY = RetryPolicy()
MAX_FILTER_CHARS = 1024
"""A text filter longer than this cannot match anything stored (names, queues, labels are
shorter) and is refused instead of being sent to the store."""

# In a query string an unescaped "+" arrives as a space: "...T15:00:00 01:00" meant "+01:00".
_SPACE_OFFSET = re.compile(r"^(.*\d) (\d{2}:\d{2})$")


class TaskBuilder:
    """Turns validated create/patch bodies into :class:`NewTask` / :class:`TaskPatch`.

    Enforces ``max_payload_bytes`` on the encoded payload and runs ``validate_target`` (the
    server's network guard) on each target. ``delay_seconds`` is added to the *store's* now, the
    time authority, read once per call.
    """

    def __init__(self, max_payload_bytes: int, validate_target: TargetCheck | None = None) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.validate_target = validate_target

    def payload_json(self, payload: Any, field: str) -> str:
        """The payload as JSON text, refused when over the size limit."""
        try:
            raw = orjson.dumps(payload)
        except orjson.JSONEncodeError as exc:
            raise ValidationError(f"cannot be stored as JSON: {exc}", field=field) from None
        if len(raw) > self.max_payload_bytes:
            raise PayloadTooLarge(
                f"{field} is {len(raw)} bytes encoded; the limit is {self.max_payload_bytes}",
                field=field,
            )
        return raw.decode()

    async def new_tasks(
        self,
        store: StoreClock,
        tenant_id: str,
        bodies: Sequence[TaskCreate | Plain],
        *,
        batch: bool,
    ) -> list[NewTask]:
        """One :class:`NewTask` per body (a model, or a batch item that
        :func:`~duetime.api.batch_body.parse_batch` read as plain); field paths get a
        ``tasks.N.`` prefix when ``batch``."""
        now: datetime | None = None
        if any(isinstance(body, TaskCreate) and body.delay_seconds for body in bodies):
            now = await store.now()
        checked: dict[tuple[Any, ...], Mapping[str, Any]] = {}
        return [
            self.new_plain(body, tenant_id, f"tasks.{i}." if batch else "", checked)
            if isinstance(body, tuple)
            else self.new_task(body, tenant_id, now, f"tasks.{i}." if batch else "")
            for i, body in enumerate(bodies)
        ]

    def new_plain(
        self,
        plain: Plain,
        tenant_id: str,
        prefix: str,
        checked: dict[tuple[Any, ...], Mapping[str, Any]],
    ) -> NewTask:
        """The :class:`NewTask` of a plain batch item: what :meth:`new_task` makes of the same
        item read by ``TaskCreate`` (no retry, parents, delay, idempotency key or reference).

        ``checked`` holds the targets this call has checked already, as stored, by what tells
        plain targets apart (type, URL and method; a plain one has no headers): a batch checks
        each distinct target once (its items mostly share one)."""
        target, payload, name, queue, run_at, priority, timeout, labels, key = plain
        if self.validate_target is not None:
            seen = (target["type"], target.get("url"), target.get("method"))
            stored = checked.get(seen)
            if stored is None:
                stored = checked[seen] = self._check_target(target, prefix)
            target = dict(stored)
        return NewTask(
            tenant_id=tenant_id,
            target=target,
            payload_json=self.payload_json(payload, prefix + "payload"),
            name=name,
            queue=queue,
            run_at=run_at,
            priority=priority,
            retry=DEFAULT_RETRY,
            timeout_seconds=timeout,
            concurrency_key=key,
            labels=labels,
        )

    def new_task(
        self, body: TaskCreate, tenant_id: str, now: datetime | None, prefix: str = ""
    ) -> NewTask:
        run_at = body.run_at
        if body.delay_seconds:
            assert now is not None, "new_tasks reads the store's clock for delays"
            run_at = now + timedelta(seconds=body.delay_seconds)
        target = body.target.model_dump()
        if self.validate_target is not None:
            target = dict(self._check_target(target, prefix))
        return NewTask(
            tenant_id=tenant_id,
            target=target,
            payload_json=self.payload_json(body.payload, prefix + "payload"),
            name=body.name,
            queue=body.queue,
            run_at=run_at,
            idempotency_key=body.idempotency_key,
            priority=body.priority,
            retry=body.retry.to_policy() if body.retry is not None else DEFAULT_RETRY,
            timeout_seconds=body.timeout_seconds,
            depends_on=tuple(dict.fromkeys(body.depends_on)),
            concurrency_key=body.concurrency_key,
            labels=body.labels,
            request_hash=request_hash(body),
            payload_ref=body.payload_ref,
        )

    def _check_target(self, target: Mapping[str, Any], prefix: str) -> Mapping[str, Any]:
        """``target`` as it is stored: checked, and changed where the check says (a broker
        URL's secret sealed)."""
        assert self.validate_target is not None
        try:
            return self.validate_target(target) or target
        except ValidationError as exc:
            raise ValidationError(exc.detail, field=prefix + (exc.field or "target")) from None
        except ValueError as exc:
            raise ValidationError(str(exc), field=prefix + "target.url") from None

    def patch(self, body: TaskPatchIn) -> TaskPatch:
        """The changes a PATCH asks for; an empty body is refused."""
        given = body.model_fields_set
        if not given:
            raise ValidationError("give at least one of run_at, payload, priority, labels")
        return TaskPatch(
            run_at=body.run_at,
            payload_json=self.payload_json(body.payload, "payload") if "payload" in given else None,
            priority=body.priority,
            labels=body.labels,
        )


def encode_cursor(task_id: str) -> str:
    """The opaque cursor that continues a listing after ``task_id``."""
    return base64.urlsafe_b64encode(task_id.encode()).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> str:
    """The task id inside a cursor made by :func:`encode_cursor`."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not is_uuid(text):
        raise ValidationError("not a cursor this server returned", field="cursor")
    return text


def query_time(value: str | None, field: str) -> datetime | None:
    """An RFC 3339 query parameter (tolerating ``+`` decoded to a space before the offset)."""
    if value is None:
        return None
    check(value, field, max_length=MAX_FILTER_CHARS)
    match = _SPACE_OFFSET.match(value)
    if match:
        value = f"{match.group(1)}+{match.group(2)}"
    try:
        return parse_rfc3339(value)
    except PydanticCustomError as exc:
        raise ValidationError(exc.message(), field=field) from None


def text_filter(value: str | None, field: str) -> str | None:
    """A text query parameter, refused (422 naming ``field``) when it holds a control character
    or a lone surrogate, or is too long to match anything."""
    return None if value is None else check(value, field, max_length=MAX_FILTER_CHARS)


def path_text(raw: str, field: str) -> str:
    """A path segment naming a resource, refused (422 naming ``field``) when it holds a control
    character or a lone surrogate, or is too long to name anything."""
    return check(raw, field, max_length=MAX_FILTER_CHARS)


def path_id(raw: str, field: str) -> str | None:
    """The canonical form of a UUID path id; None when it is not one (the caller's 404). A
    control character or lone surrogate is a 422 naming ``field``."""
    check(raw, field, max_length=MAX_FILTER_CHARS)
    return uuid_text(raw)


def task_filter(
    tenant_id: str,
    *,
    status: Sequence[str],
    queue: str | None,
    name: str | None,
    schedule_id: str | None,
    label: Sequence[str],
    run_after: str | None,
    run_before: str | None,
    limit: int,
    cursor: str | None,
) -> TaskFilter:
    """The store query for ``GET /v1/tasks``. ``status`` items may be comma lists; ``label`` items
    read ``key:value``."""
    statuses: list[TaskStatus] = []
    for item in status:
        for word in item.split(","):
            word = word.strip()
            if not word:
                continue
            try:
                statuses.append(TaskStatus(word))
            except ValueError:
                choices = ", ".join(s.value for s in TaskStatus)
                detail = f"unknown status {word!r}; one of {choices}"
                raise ValidationError(detail, field="status") from None
    labels: dict[str, str] = {}
    for item in label:
        check(item, "label", max_length=MAX_FILTER_CHARS)
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise ValidationError(f"{item!r} is not key:value", field="label")
        labels[key] = value
    return TaskFilter(
        tenant_id=tenant_id,
        statuses=tuple(dict.fromkeys(statuses)),
        queue=text_filter(queue, "queue"),
        name=text_filter(name, "name"),
        schedule_id=text_filter(schedule_id, "schedule_id"),
        labels=labels,
        run_after=query_time(run_after, "run_after"),
        run_before=query_time(run_before, "run_before"),
        limit=limit,
        cursor=decode_cursor(cursor) if cursor else None,
    )
