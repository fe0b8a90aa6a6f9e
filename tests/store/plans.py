"""Reading PostgreSQL plans in the plan tests: the nodes of an ``EXPLAIN (FORMAT JSON)`` plan."""

from __future__ import annotations

from typing import Any


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of ``plan`` (a JSON plan's ``"Plan"``), the root first, depth first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(plan_nodes(child))
    return found
