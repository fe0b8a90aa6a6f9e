"""The upgrade rule of docs/operations.md ("Upgrades"), kept true by reading every migration: a
migration adds tables, columns (nullable or with a default) and indexes, and may drop or rebuild
an index or replace a function; it never drops, renames or retypes a table or a column, nor makes
an existing column NOT NULL. Statements inside a function body (``$$ ... $$``: the history
partition functions drop old partitions at run time, by retention) and comments are not the
migration's own and are not read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[2] / "src" / "duetime" / "store"
MIGRATIONS = sorted(STORE.glob("*/migrations/*.sql"))

FORBIDDEN = {
    "drops a table": re.compile(r"\bDROP\s+TABLE\b"),
    "drops a column": re.compile(
        r"\bDROP\s+(COLUMN\b|(?!INDEX|TRIGGER|FUNCTION|CONSTRAINT)\w+\s*[,;])"
    ),
    "renames": re.compile(r"\bRENAME\b"),
    "changes a column's type": re.compile(r"\bALTER\s+(COLUMN\s+)?\w+\s+(SET\s+DATA\s+)?TYPE\b"),
    "makes a column NOT NULL": re.compile(r"\bSET\s+NOT\s+NULL\b"),
    "empties a table": re.compile(r"(?:^|;)\s*(?:TRUNCATE|DELETE\s+FROM)\b"),
}
ADDED_COLUMN = re.compile(r"\bADD\s+COLUMN\s+[^,;]*", re.S)


def _statements(sql: str) -> str:
    """The migration's own SQL, upper-cased: comments and dollar-quoted bodies left out."""
    sql = re.sub(r"\$(\w*)\$.*?\$\1\$", "$$", sql, flags=re.S)
    sql = re.sub(r"--[^\n]*", "", sql)
    sql = re.sub(r"/\*.*?\*/", "", sql, flags=re.S)
    return sql.upper()


def test_every_store_has_migrations() -> None:
    assert {p.parent.parent.name for p in MIGRATIONS} == {"sqlite", "postgres"}
    assert len(MIGRATIONS) >= 30


@pytest.mark.parametrize("migration", MIGRATIONS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_migration_only_adds_to_tables_and_columns(migration: Path) -> None:
    sql = _statements(migration.read_text())
    broken = [why for why, pattern in FORBIDDEN.items() if pattern.search(sql)]
    assert not broken, f"{migration.name} {', '.join(broken)}: the upgrade rule forbids it"
    for added in ADDED_COLUMN.findall(sql):
        if "NOT NULL" in added:
            assert "DEFAULT" in added or "GENERATED" in added, (
                f"{migration.name}: {added.strip()!r} is NOT NULL without a default, so an "
                "older node's inserts would fail"
            )


def test_the_scan_sees_what_it_forbids() -> None:
    bad = {
        "DROP TABLE tasks;": "drops a table",
        "ALTER TABLE tasks DROP COLUMN payload;": "drops a column",
        "ALTER TABLE tasks DROP payload;": "drops a column",
        "ALTER TABLE tasks RENAME COLUMN a TO b;": "renames",
        "ALTER TABLE tasks ALTER COLUMN a TYPE bigint;": "changes a column's type",
        "ALTER TABLE tasks ALTER COLUMN a SET NOT NULL;": "makes a column NOT NULL",
        "DELETE FROM tasks;": "empties a table",
        "SELECT 1; TRUNCATE tasks;": "empties a table",
    }
    for sql, why in bad.items():
        assert FORBIDDEN[why].search(_statements(sql)), sql
    allowed = (
        "DROP INDEX tasks_tenant_idx; DROP INDEX IF EXISTS x;"
        " ALTER TABLE h ALTER COLUMN rows SET STORAGE EXTERNAL;"
        " CREATE FUNCTION f() RETURNS void AS $$ BEGIN EXECUTE 'DROP TABLE p'; END $$;"
        " CREATE TRIGGER t AFTER TRUNCATE ON tasks FOR EACH STATEMENT EXECUTE FUNCTION f();"
        " -- DROP TABLE in a comment"
    )
    assert not [w for w, p in FORBIDDEN.items() if p.search(_statements(allowed))]
