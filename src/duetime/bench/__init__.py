"""``duetime bench``: load scenarios measuring duetime on this machine (docs/benchmarks.md)."""
