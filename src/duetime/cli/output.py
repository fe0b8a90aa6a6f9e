"""How CLI commands print what they got: ``-o json`` (default), ``-o yaml``, ``-o table`` (a
rich table: one row per item of a list, or one row per field of a single object) and, for
listings, ``-o jsonl`` (one JSON object per line).

YAML is written here, not with a YAML library (the client install has none): the data is JSON
values, strings are written as JSON strings (valid YAML double-quoted scalars), so the output
reads back with any YAML 1.2 parser as the same values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

import orjson
import typer

MAX_TABLE_COLUMNS = 8
PIPED_WIDTH = 4096
MAX_CELL_CHARS = 60
SHORT_ID_CHARS = 13
"""A table shows ids this long at least (``0190f000-7c3a``: an id's 48-bit millisecond), longer
where that leaves two of its rows alike; every command taking a task id takes such a prefix."""

Row = Mapping[str, Any]
Shape = Callable[[Row], Row]
"""How a listing's item becomes a table row (columns renamed, nested fields brought up)."""


class OutputFormat(StrEnum):
    """``-o`` values."""

    JSON = "json"
    YAML = "yaml"
    TABLE = "table"
    JSONL = "jsonl"


OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="json (default), yaml, table, or jsonl for listings."),
]


def _jsonable(data: Any) -> Any:
    return orjson.loads(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))


def to_json(data: Any) -> str:
    """Pretty JSON."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return orjson.dumps(value).decode()
    return orjson.dumps(str(value)).decode()  # a JSON string is a YAML double-quoted scalar


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_YAML_WORDS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"})


def _key(key: str) -> str:
    """A mapping key: bare when it cannot be read as anything but that string."""
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS:
        return key
    return _scalar(key)


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            head = f"{pad}{_key(str(key))}:"
            if isinstance(item, dict | list) and item:
                lines.append(head)
                lines.extend(_yaml_lines(item, indent + 2))
            else:
                lines.append(f"{head} {_yaml_lines(item, 0)[0]}")
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            inner = _yaml_lines(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines.extend(inner[1:])
        return lines
    return [pad + _scalar(value)]


def to_yaml(data: Any) -> str:
    """``data`` (JSON values) as YAML."""
    return "\n".join(_yaml_lines(_jsonable(data), 0))


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else "-" if value is None else to_compact(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def to_compact(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _rows(data: Any) -> tuple[list[dict[str, Any]], str | None] | None:
    """The items of a listing (``{"items": [...]}`` or a list) and its next cursor, or None."""
    if isinstance(data, list):
        return [i if isinstance(i, dict) else {"value": i} for i in data], None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = [i if isinstance(i, dict) else {"value": i} for i in data["items"]]
        return items, data.get("next_cursor")
    return None


def short_ids(items: Sequence[Row], key: str = "id") -> Shape:
    """A table :data:`Shape` cutting each item's ``key`` to the shortest length, at least
    :data:`SHORT_ID_CHARS`, that keeps the listed ids apart (and never ends on a dash)."""
    ids = [str(item.get(key)) for item in items if item.get(key) is not None]
    length = SHORT_ID_CHARS
    while len({i[:length] for i in ids}) < len(set(ids)):
        length += 1
    if any(i[length - 1 : length] == "-" for i in ids):
        length += 1

    def shape(item: Row) -> Row:
        value = item.get(key)
        return item if value is None else {**item, key: str(value)[:length]}

    return shape


def print_table(
    data: Any, columns: Sequence[str] | None = None, shape: Shape | None = None
) -> None:
    """A rich table: a listing's items as rows (``columns``, or the first scalar fields; each
    item passed through ``shape`` first when given), or a single object's fields as rows."""
    from rich.console import Console
    from rich.table import Table

    data = _jsonable(data)
    console = Console(soft_wrap=False)
    if not console.is_terminal:  # piped or captured: never cut an id to fit 80 columns
        console = Console(soft_wrap=False, width=PIPED_WIDTH)
    listing = _rows(data)
    if listing is None:
        table = Table("FIELD", "VALUE", box=None, show_edge=False)
        for key, value in (data if isinstance(data, dict) else {"value": data}).items():
            table.add_row(str(key), _cell(value), style=None)
        console.print(table, markup=False, highlight=False)
        return
    items, next_cursor = listing
    if shape is not None:
        items = [dict(shape(item)) for item in items]
    if columns is None:
        seen: dict[str, None] = {}
        for item in items:
            for key, value in item.items():
                if not isinstance(value, dict | list):
                    seen.setdefault(key)
        columns = list(seen)[:MAX_TABLE_COLUMNS]
    table = Table(*(c.upper() for c in columns), box=None, show_edge=False)
    for item in items:
        table.add_row(*(_cell(item.get(c)) for c in columns))
    console.print(table, markup=False, highlight=False)
    if next_cursor:
        typer.echo(f"next cursor: {next_cursor}", err=True)


def emit(
    output: OutputFormat,
    data: Any,
    columns: Sequence[str] | None = None,
    table: Shape | None = None,
) -> None:
    """Print ``data`` as ``output`` asks; a table shows ``columns`` of each item as ``table``
    shapes it (see :func:`print_table`)."""
    if output is OutputFormat.YAML:
        typer.echo(to_yaml(data))
    elif output is OutputFormat.TABLE:
        print_table(data, columns, table)
    elif output is OutputFormat.JSONL:
        listing = _rows(_jsonable(data))
        for item in listing[0] if listing is not None else [_jsonable(data)]:
            typer.echo(to_compact(item))
    else:
        typer.echo(to_json(data))
