"""duetime's own PostgreSQL schema: where every object of the store lives, how a connection finds
it, and how a database laid out before there was one moves into it.

Every table, type, function and sequence is created unqualified by the migrations, on connections
whose ``search_path`` is the store's schema alone (:func:`server_settings`), so duetime shares an
application's database without clashing on common names (``tasks``, ``tenants``, ``attempts``).
The schema is ``duetime`` unless the store URL names another with ``?schema=NAME`` (removed from
the URL before it reaches asyncpg, which would send an unknown parameter to the server as a
setting). A name is lower-case letters, digits and ``_``, at most :data:`MAX_SCHEMA_LENGTH`
characters: it needs no quoting anywhere, and the notify channels built on it
(:func:`channel`) stay within PostgreSQL's 63-byte identifiers.

A database migrated before the schema existed holds duetime's objects in ``public`` (told by
duetime's bookkeeping there beside its ``tasks`` table and ``task_input`` type).
:func:`migrate` moves them, inside the migrating transaction and before any pending migration
runs, by a rule rather than a list: every table, view, sequence, type and function in ``public``
whose name a shipped migration creates (``CREATE TABLE foo``, ``CREATE FUNCTION bar``...), each
partition of a moved table (history's monthly partitions are made at run time), plus
``schema_migrations``. A table takes its indexes, constraints, triggers, owned sequences and row
type along. So whatever a migration creates, now or later, moves with the rest, and a migration
that was pending runs in the new schema.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from duetime.errors import ConfigError
from duetime.store.core.migrations import migrate as migrate_scripts
from duetime.store.core.migrations import pending as pending_scripts
from duetime.store.core.plan import Plan, Row, all_, execute, value

log = logging.getLogger("duetime.store")

DEFAULT_SCHEMA = "duetime"
SCHEMA_PARAM = "schema"
"""The store URL's query parameter that names the schema: ``postgresql://.../app?schema=jobs``."""
MAX_SCHEMA_LENGTH = 50
_SCHEMA_NAME = re.compile(rf"[a-z_][a-z0-9_]{{0,{MAX_SCHEMA_LENGTH - 1}}}")
_CREATES = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+)?"
    r"(?:TABLE|TYPE|FUNCTION|PROCEDURE|SEQUENCE|VIEW|MATERIALIZED\s+VIEW|DOMAIN|AGGREGATE)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\b(?!\.)",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"--[^\n]*")

BOOKKEEPING = "schema_migrations"


def split_url(url: str) -> tuple[str, str]:
    """``url`` without its ``schema`` parameter, and the schema it names (default
    :data:`DEFAULT_SCHEMA`); ``ConfigError`` for a name outside the rule (see the module)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in query if k == SCHEMA_PARAM]
    schema = named[-1] if named else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ConfigError(
            f"store URL parameter schema={schema!r}: a schema name is lower-case letters, digits "
            f"and _, starting with a letter or _, at most {MAX_SCHEMA_LENGTH} characters"
        )
    if not named:
        return url, schema
    rest = urlencode([(k, v) for k, v in query if k != SCHEMA_PARAM])
    return urlunsplit(parts._replace(query=rest)), schema


def server_settings(schema: str) -> dict[str, str]:
    """The session settings that make ``schema`` the only schema unqualified names resolve in
    (``pg_catalog`` is always searched first; ``pg_temp`` is not searched for functions)."""
    return {"search_path": schema}


def channel(schema: str, signal: str) -> str:
    """The LISTEN/NOTIFY channel of ``signal`` (``ready``, ``due``, ``polls``) for the store in
    ``schema``: ``duetime_ready`` in the default schema. Channels are per database, so two
    deployments in two schemas of one database do not wake each other."""
    return f"{schema}_{signal}"


async def connect(url: str, **kwargs: Any) -> asyncpg.Connection[Any]:
    """A plain asyncpg connection to the store at ``url`` (``schema`` parameter and all), its
    unqualified names resolving in the store's schema: for tools and tests that read the store's
    tables directly. ``server_settings`` given are kept, the search path added."""
    bare, schema = split_url(url)
    settings = {**kwargs.pop("server_settings", {}), **server_settings(schema)}
    conn: asyncpg.Connection[Any] = await asyncpg.connect(bare, server_settings=settings, **kwargs)
    return conn


def created_names(scripts: Mapping[str, str]) -> list[str]:
    """Every name a migration creates (comments aside), and ``schema_migrations``: the objects
    :func:`migrate` moves out of ``public``."""
    names = {BOOKKEEPING}
    for script in scripts.values():
        names.update(m.group(1).lower() for m in _CREATES.finditer(_COMMENT.sub("", script)))
    return sorted(names)


def _version(r: Row, _d: Any) -> Any:
    return r["version"]


def migrate(schema: str, scripts: Mapping[str, str]) -> Plan[list[str]]:
    """The migration plan on PostgreSQL: make ``schema`` when missing, move a database laid out
    in ``public`` into it (see the module), then apply the pending ``scripts`` there. One
    transaction, under the migration lock."""
    yield execute("migrations_lock")
    legacy = yield value("schema_legacy", schema=schema)
    yield execute("schema_functions")
    moved = yield value(
        "schema_prepare", schema=schema, names=created_names(scripts), legacy=legacy
    )
    yield execute("schema_functions_drop")
    if moved:
        log.warning("moved %d objects of duetime from schema public into %s", moved, schema)
    return (yield from migrate_scripts(scripts))


def pending(schema: str, scripts: Mapping[str, str]) -> Plan[list[str]]:
    """The versions :func:`migrate` would apply; a database still in ``public`` reads its
    bookkeeping there (the move itself is not a version)."""
    if (yield value("schema_legacy", schema=schema)):
        done = set((yield all_("schema_legacy_versions", _version)))
        return [version for version in scripts if version not in done]
    return (yield from pending_scripts(scripts))
