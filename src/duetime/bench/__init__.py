"""``duetime bench``: load scenarios that measure duetime on this machine (see docs/benchmarks.md)."""
