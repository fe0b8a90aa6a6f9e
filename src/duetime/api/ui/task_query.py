"""The task list's filters as its form, links and bulk forms carry them (:class:`ListQuery`),
and the store queries made of them: a page of the list, and the walk a bulk cancel or replay
of every matching task takes (the API's :func:`~duetime.api.bulk.bulk_filter`, narrowed by the
dashboard's searches)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import takewhile
from typing import Any

from duetime.api.bulk import Action, BulkIn, bulk_filter
from duetime.api.convert import decode_cursor, encode_cursor, task_filter
from duetime.api.ui import forms
from duetime.api.ui.search import IdSearch, error_search, id_search, payload_search
from duetime.api.ui.session import UiCall, first
from duetime.errors import ValidationError
from duetime.types import Task, TaskFilter

FIELDS = ("status", "queue", "name", "label", "id", "error", "payload")
"""The list's filter fields, in the order the form shows them."""
COUNT_PAGE = 500


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The list's filters as typed (empty: unused): the API's ``status``, ``queue``, ``name``
    and ``label`` (``key:value``), and the searches ``id`` (an id or its first hex digits),
    ``error`` (text of the last error) and ``payload`` (``payload.<path> = <value>``)."""

    status: str = ""
    queue: str = ""
    name: str = ""
    label: str = ""
    id: str = ""
    error: str = ""
    payload: str = ""

    @classmethod
    def from_form(cls, form: dict[str, list[str]]) -> ListQuery:
        return cls(**{name: first(form, name).strip() for name in FIELDS})

    def params(self) -> dict[str, str]:
        """The filters for a link or a form's hidden fields (the empty ones left out)."""
        return {name: getattr(self, name) for name in FIELDS if getattr(self, name)}

    def store_filter(
        self, tenant_id: str, *, limit: int, cursor: str | None
    ) -> tuple[TaskFilter, IdSearch | None]:
        """A page's store query (``cursor``: the opaque one of the list's links) and the id
        search that ends its matches; ``ValidationError`` naming the field at fault."""
        query = task_filter(
            tenant_id,
            status=[self.status] if self.status else [],
            queue=self.queue or None,
            name=self.name or None,
            schedule_id=None,
            label=[self.label] if self.label else [],
            run_after=None,
            run_before=None,
            limit=limit,
            cursor=None,
        )
        ids = id_search(self.id)
        after = decode_cursor(cursor) if cursor else None
        query = dataclasses.replace(
            query,
            cursor=ids.cursor(after) if ids is not None else after,
            error_contains=error_search(self.error),
            payload_equals=payload_search(self.payload),
        )
        return query, ids

    def bulk_query(self, tenant_id: str, action: Action) -> TaskFilter:
        """The walk of a bulk ``action`` on every task matching these filters: the API's
        (statuses the action may change; replay defaults to ``failed``), with the searches.
        An id search is refused: its matches are listed, to be selected."""
        if self.id:
            raise ValidationError(
                "an id search lists its tasks: select them to act on them", field="id"
            )
        statuses = [word.strip() for word in self.status.split(",") if word.strip()]
        body: dict[str, Any] = {"status": statuses or None}
        body |= {"queue": self.queue or None, "name": self.name or None}
        if self.label:
            key, sep, value = self.label.partition(":")
            if not sep or not key:
                raise ValidationError(f"{self.label!r} is not key:value", field="label")
            body["labels"] = {key: value}
        parsed, errors = forms.validate(BulkIn, body)
        if parsed is None:
            field, detail = next(iter(errors.items()))
            raise ValidationError(detail, field=field)
        return dataclasses.replace(
            bulk_filter(tenant_id, action, parsed),
            error_contains=error_search(self.error),
            payload_equals=payload_search(self.payload),
        )


async def list_page(
    call: UiCall, query: ListQuery, limit: int, cursor: str | None
) -> tuple[list[Task], str | None]:
    """One page of the list, newest first, and the cursor of the next (None on the last)."""
    store_query, ids = query.store_filter(call.tenant_id, limit=limit + 1, cursor=cursor)
    found = await call.store.task_list(store_query)
    if ids is not None:  # below the prefix's ids the walk has left the matches
        found = list(takewhile(lambda t: ids.matches(t.id), found))
    page = found[:limit]
    return page, encode_cursor(page[-1].id) if len(found) > limit else None


async def count_matching(call: UiCall, query: TaskFilter, most: int) -> tuple[int, str | None]:
    """How many tasks ``query`` walks, counted up to ``most + 1`` (a page of ids at a time),
    and the newest of them (None when none)."""
    count, newest, cursor = 0, None, query.cursor
    while count <= most:
        page = await call.store.task_list(
            dataclasses.replace(query, limit=min(COUNT_PAGE, most + 1 - count), cursor=cursor)
        )
        if not page:
            break
        newest = newest or page[0].id
        count += len(page)
        cursor = page[-1].id
    return count, newest
