"""The one SQL loader and what both backends ship: the same migrations, the same statements."""

from __future__ import annotations

import pytest

from duetime.store import sql
from duetime.store.postgres import driver as pg_driver
from duetime.store.sqlite import driver as sqlite_driver


def test_both_backends_ship_the_same_migration_versions() -> None:
    sqlite = list(sql.migrations("duetime.store.sqlite"))
    postgres = list(sql.migrations("duetime.store.postgres"))
    assert sqlite == postgres
    assert sqlite == sorted(sqlite) and sqlite[0] == "0001_init"


def test_both_backends_define_every_statement_the_core_names() -> None:
    assert set(pg_driver.QUERIES) == set(sqlite_driver.QUERIES)


def test_both_dialects_bind_the_same_parameters() -> None:
    for name, query in sqlite_driver.QUERIES.items():
        # ``now`` may be the database's own clock on PostgreSQL.
        assert set(query.names) - {"now"} == set(pg_driver.QUERIES[name].names) - {"now"}, name


def test_postgres_names_become_positions_in_order_of_first_use() -> None:
    text = """-- name: q
SELECT ':not_me', "col:x", a::text -- :comment
FROM t WHERE a = :b AND c = coalesce(:now::timestamptz, now()) AND d = :b /* :e */"""
    query = sql.parse(text, "postgres")["q"]
    assert query.names == ("b", "now")
    assert "$1" in query.text and "$2::timestamptz" in query.text
    assert "':not_me'" in query.text and ":comment" in query.text and ":e" in query.text
    sqlite = sql.parse(text, "sqlite")["q"]
    assert sqlite.names == ("b", "now") and sqlite.text.count(":b") == 2


def test_mixed_parameter_styles_and_repeated_names_are_refused() -> None:
    with pytest.raises(ValueError, match="mixes"):
        sql.parse("-- name: q\nSELECT $1, :a", "postgres")
    with pytest.raises(ValueError, match="twice"):
        sql.parse("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;", "sqlite")
    with pytest.raises(ValueError, match="empty"):
        sql.parse("-- name: q\n-- only a comment\n", "sqlite")


def test_a_fragment_is_included_by_name_before_parameters_are_numbered() -> None:
    text = """-- fragment: tail
WHERE a = :a AND b = :b
-- name: q
SELECT x FROM t
-- include: tail
AND c = :c;"""
    queries = sql.parse(text, "postgres")
    assert list(queries) == ["q"]
    assert queries["q"].names == ("a", "b", "c")
    assert "WHERE a = $1 AND b = $2" in queries["q"].text and "c = $3" in queries["q"].text
    with pytest.raises(ValueError, match="unknown"):
        sql.parse("-- name: q\nSELECT 1\n-- include: nope\n", "sqlite")
