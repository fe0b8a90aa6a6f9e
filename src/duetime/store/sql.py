"""The one loader of the stores' SQL files and migrations, shared by both backends.

A query file holds blocks that start with a ``-- name: <query_name>`` line; everything up to the
next such line (less trailing comment lines, which introduce the next query) is that query's text.
Keeping SQL in ``.sql`` files lets it be read, reviewed and run by hand, and no statement is ever
assembled from strings at run time.

Parameters are named, ``:tenant_id``, in both dialects. SQLite binds names itself; for
PostgreSQL the loader rewrites them to ``$1, $2, ...`` in order of first use and keeps the order
(:attr:`Query.names`), so the driver passes a mapping and nobody counts positions. Casts
(``:now::timestamptz``), string literals and comments are left alone.

A block headed ``-- fragment: <name>`` is not a statement: a line ``-- include: <name>`` in a
later block of the same file is replaced by its text before that block is compiled, so a piece
that several statements share (the claim's UPDATE) is written once, and composed at load time.

Migrations are ``migrations/NNNN_slug.sql`` in each backend's package; a migration's version is
its file stem (``0001_init``), applied in name order. Both backends ship the same versions
(``tests/unit/test_store_sql.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Literal

Dialect = Literal["sqlite", "postgres"]

PLAN_FILES = (
    "circuits.sql",
    "credentials.sql",
    "flow.sql",
    "follow.sql",
    "graph.sql",
    "history.sql",
    "hot.sql",
    "identity.sql",
    "leadership.sql",
    "leases.sql",
    "lifecycle.sql",
    "notifications.sql",
    "outbox.sql",
    "queueing.sql",
    "schedules.sql",
    "tasks.sql",
    "tenancy.sql",
    "workflows.sql",
)
"""The query files, one per domain of :mod:`duetime.store.core`, that each backend ships in its
own dialect with the same statements: what the core's plans name."""

_NAME_LINE = re.compile(
    r"^--\s*(?P<kind>name|fragment):\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE
)
_INCLUDE = re.compile(r"^[ \t]*--\s*include:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^\d{4}_[a-z0-9_]+\.sql$")
# Strings, quoted identifiers, comments and casts are skipped; group 1 is a parameter's name.
_TOKENS = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|::|(?<![:\w]):([A-Za-z_]\w*)",
    re.DOTALL,
)
_POSITIONAL = re.compile(r"\$\d+")


@dataclass(frozen=True, slots=True)
class Query:
    """One named statement: its text in the backend's dialect and its parameters' names, in the
    order the text binds them (PostgreSQL) or first use (SQLite, which binds by name)."""

    name: str
    text: str
    names: tuple[str, ...]


def parse(text: str, dialect: Dialect, *, source: str = "queries") -> dict[str, Query]:
    """Split ``-- name: foo`` blocks into queries. A repeated or empty name is an error, and so
    is a PostgreSQL query that mixes ``$n`` with ``:name`` parameters."""
    found: dict[str, Query] = {}
    fragments: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        name = match.group("name")
        if name in found or name in fragments:
            raise ValueError(f"query {name!r} is defined twice in {source}")
        body = text[match.end() : following.start() if following else None]
        try:
            body = _INCLUDE.sub(lambda m: fragments[m.group("name")], body)
        except KeyError as exc:
            raise ValueError(f"query {name!r} in {source} includes unknown {exc}") from None
        body = _strip_trailing_comments(body)
        if not body:
            raise ValueError(f"query {name!r} in {source} is empty")
        if match.group("kind") == "fragment":
            fragments[name] = body
        else:
            found[name] = _compile(name, body, dialect, source)
    return found


def _compile(name: str, body: str, dialect: Dialect, source: str) -> Query:
    names: list[str] = []

    def bind(match: re.Match[str]) -> str:
        param = match.group(1)
        if param is None:
            return match.group(0)
        if param not in names:
            names.append(param)
        return f"${names.index(param) + 1}" if dialect == "postgres" else match.group(0)

    text = _TOKENS.sub(bind, body)
    if names and dialect == "postgres" and _POSITIONAL.search(_TOKENS.sub("", body)):
        raise ValueError(f"query {name!r} in {source} mixes $n and :name parameters")
    return Query(name=name, text=text, names=tuple(names))


def _strip_trailing_comments(block: str) -> str:
    lines = block.strip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
        lines.pop()
    return "\n".join(lines)


def load(package: str, dialect: Dialect, *files: str) -> dict[str, Query]:
    """Every query of ``files`` (in ``package``), by name; a name defined twice is an error."""
    queries: dict[str, Query] = {}
    for file in files:
        text = resources.files(package).joinpath(file).read_text(encoding="utf-8")
        for name, query in parse(text, dialect, source=f"{package}/{file}").items():
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice ({package}/{file})")
            queries[name] = query
    return queries


def migrations(package: str) -> Mapping[str, str]:
    """Every migration ``package`` ships: version (file stem) → script, in apply order."""
    folder = resources.files(package).joinpath("migrations")
    scripts = {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if _MIGRATION.match(entry.name)
    }
    return dict(sorted(scripts.items()))
