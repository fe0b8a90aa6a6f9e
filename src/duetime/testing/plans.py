"""PostgreSQL plans of the store's statements, for the plan tests (``tests/store``) and the plan
benchmarks (``benchmarks/plan_backlog.py``, ``benchmarks/keyed_claim.py``): a statement's text
with its ``EXECUTE`` arguments, the plan PostgreSQL runs it with, and that plan's nodes.

Statements are prepared without declared parameter types, so PostgreSQL infers them as it does
for the store's own prepared statements.
"""

from __future__ import annotations

import json
from typing import Any

from duetime.store.postgres import driver, history, hot


def statement(name: str, values: dict[str, str]) -> tuple[str, str]:
    """Store statement ``name``'s text (any statement file) and its ``EXECUTE`` arguments, SQL
    literals from ``values`` by parameter name, in the order its ``$n`` want them (``now``
    defaults to ``NULL``: the database clock)."""
    query = hot.Q.get(name) or history.EXPORT.get(name) or driver.QUERIES[name]
    values = {"now": "NULL", **values}
    return query.text, ", ".join(values[n] for n in query.names)


async def explain(
    conn: Any, query: str, args: str, *, mode: str | None = None, analyze: bool = False
) -> dict[str, Any]:
    """The plan of ``query`` prepared and executed with ``args``: with ``mode``
    (``force_generic_plan``, ``force_custom_plan``) set for the session first, else under the
    session's ``plan_cache_mode``; ``analyze`` runs it (roll back around the call)."""
    if mode is not None:
        await conn.execute(f"SET plan_cache_mode = {mode}")
    await conn.execute(f"PREPARE q AS {query.rstrip().rstrip(';')}")
    try:
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        raw = await conn.fetchval(f"EXPLAIN ({options}) EXECUTE q({args})")
    finally:
        await conn.execute("DEALLOCATE q")
    plan: dict[str, Any] = json.loads(raw)[0]["Plan"]
    return plan


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of ``plan``, itself first, depth first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(plan_nodes(child))
    return found


def index_names(plan: dict[str, Any]) -> set[str]:
    """The indexes ``plan`` scans."""
    return {n["Index Name"] for n in plan_nodes(plan) if "Index Name" in n}


def rows_read(plan: dict[str, Any]) -> int:
    """Rows an analyzed plan's scans of ``tasks`` returned or filtered out, over all loops."""
    total = 0.0
    for n in plan_nodes(plan):
        if n.get("Relation Name") == "tasks" and n["Node Type"] != "ModifyTable":
            total += (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
    return round(total)
