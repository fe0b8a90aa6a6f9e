"""What an ``ID`` argument names: a task by its whole id or a unique prefix of it, a schedule by
its id or its key.

- Task: a whole id (any case, dashes or not) is used as it is. At least
  :data:`~duetime.ids.ID_PREFIX_MIN_DIGITS` hex digits (dashes where the id has them) are a
  prefix, looked up with ``GET /v1/tasks?id_prefix=``: one task → its id; none → exit 3 ("no
  task with id prefix ..."); several → exit 2, naming a few. Fewer hex digits are a usage error;
  anything else is passed on, for the server to say it names no task.
- Schedule: an id (a UUID) is used as it is; anything else is a key, looked up with ``GET
  /v1/schedules/by-key/{key}`` (none → exit 3). A key spelt like a UUID is therefore read as an
  id: address such a schedule by its id.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from duetime.cli.common import EXIT_NOT_FOUND, EXIT_USAGE, fail
from duetime.cli.connection import from_duetime
from duetime.ids import ID_PREFIX_MIN_DIGITS, id_prefix_range, uuid_text
from duetime.sdk.errors import ApiNotFound

if TYPE_CHECKING:
    from duetime.sdk.client import Client

SHOWN_MATCHES = 5
"""How many of the tasks an ambiguous prefix matches the error names."""

_HEX_AND_DASHES = re.compile(r"[0-9a-fA-F-]+")


def task_id(client: Client, given: str) -> str:
    """The id of the one task ``given`` names (see the module). Raises ``typer.Exit``."""
    whole = uuid_text(given.strip())
    if whole is not None:
        return whole
    text = given.strip()
    if id_prefix_range(text) is None:
        if _HEX_AND_DASHES.fullmatch(text) and len(text.replace("-", "")) < ID_PREFIX_MIN_DIGITS:
            raise fail(
                f"ID {given!r}: give the whole id or at least {ID_PREFIX_MIN_DIGITS} of its "
                "first hex digits",
                EXIT_USAGE,
            )
        return given  # not an id at all: the server answers that no task has it
    found = client.list_tasks(id_prefix=text, limit=SHOWN_MATCHES + 1).items
    if not found:
        raise fail(f"no task with id prefix {text!r}", EXIT_NOT_FOUND)
    if len(found) > 1:
        shown = ", ".join(task.id for task in found[:SHOWN_MATCHES])
        more = ", …" if len(found) > SHOWN_MATCHES else ""
        raise fail(
            f"id prefix {text!r} matches several tasks: {shown}{more}; give more of the id",
            EXIT_USAGE,
        )
    return found[0].id


def schedule_id(client: Client, given: str) -> str:
    """The id of the schedule ``given`` names: an id as it is, else the schedule holding that
    key. Raises ``typer.Exit`` (3) when no schedule holds the key."""
    whole = uuid_text(given.strip())
    if whole is not None:
        return whole
    try:
        return client.get_schedule_by_key(given).id
    except ApiNotFound as exc:
        if not from_duetime(exc):
            raise  # a server that is not duetime's: said as such
        raise fail(f"no schedule with id or key {given!r}", EXIT_NOT_FOUND) from None
