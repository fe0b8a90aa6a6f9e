"""The benchmarks' CPU readings from ``/proc`` (Linux): a process's own, and its children's
(a node's dispatcher processes), which ``create-sdk-single``/``-batch`` report per create."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from duetime.bench.runs import (
    children_cpu_seconds,
    process_cpu_seconds,
    stat_cpu,
    wait_settled,
)

BURN = """
import sys, time
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("burnt", flush=True)
sys.stdin.readline()
"""


def test_stat_cpu_reads_a_name_with_spaces_and_parentheses() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S"] + ["0"] * 10 + [str(3 * ticks), str(ticks)] + ["0"] * 30
    name, seconds = stat_cpu(f"42 (a) b (c)) {' '.join(fields)}")
    assert (name, seconds) == ("a) b (c)", 4.0)


def test_children_cpu_counts_live_children_only() -> None:
    before = children_cpu_seconds(os.getpid())
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        burnt = children_cpu_seconds(os.getpid()) - before
        assert burnt >= 0.25  # the loop's 0.3 s, read in clock ticks
        assert burnt == pytest.approx(process_cpu_seconds(child.pid), abs=0.05)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    deadline = time.monotonic() + 5
    while children_cpu_seconds(os.getpid()) - before >= 0.25 and time.monotonic() < deadline:
        time.sleep(0.01)  # the exit is seen once the child is reaped
    assert children_cpu_seconds(os.getpid()) - before < 0.25


def test_a_process_without_children_reads_zero() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
    )
    try:
        assert children_cpu_seconds(child.pid) == 0.0
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)


SPIN = """
import sys, time
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
sys.stdin.readline()
"""


def _spinning(seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SPIN, str(seconds)], stdin=subprocess.PIPE, text=True
    )


def test_wait_settled_waits_out_a_start_up_and_gives_up_on_a_busy_process() -> None:
    busy = _spinning(30)
    starting = _spinning(0.5)
    try:
        # A window long enough that a spinning process gets its tenth of a core in it even on a
        # machine shared with other test runs (a 0.1 s window could fall in a stretch where the
        # scheduler gave it nothing).
        assert not wait_settled(busy.pid, window=0.5, timeout=1.5)
        assert wait_settled(starting.pid, window=0.1, timeout=10)
        assert process_cpu_seconds(starting.pid) >= 0.45  # its whole start-up was waited out
    finally:
        for child in (busy, starting):
            child.kill()
            child.wait(10)
