"""Metric names in PromQL expressions, and the names a node's ``/metrics`` exports — for the
test that the shipped alert rules and dashboard only use what the node exports.

The name extraction drops what is not a metric name (quoted strings, label matchers in
braces, range and offset brackets, ``by``/``without``/``on``/``ignoring``/``group_*`` label
lists, function calls, keywords, numbers and Grafana variables) and keeps the identifiers left.
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "inf",
    "nan",
}
PROMETHEUS_MADE = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
"""Series Prometheus makes itself for every target (not exported by the node)."""


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    text = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", text)
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        following = text[match.end() :].lstrip()
        if following.startswith("(") or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def exported_names(exposition: str) -> set[str]:
    """Every sample name ``exposition`` (Prometheus text) has or, for a family without samples
    yet (a labelled metric nobody incremented), would have."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_count", "_sum"))
        else:
            names.add(family.name)
    return names
