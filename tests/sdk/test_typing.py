"""The SDK's public signatures type-check as documented: ``mypy --strict`` accepts the typed
usage example (tests/sdk/typing/typed_usage.py) and reports exactly the marked mistakes in
tests/sdk/typing/typed_mistakes.py (``delay_seconds="soon"``, a template without ``target``,
...), so task specs, overrides, templates and retry settings are checked, not ``Any``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "typing"
ROOT = HERE.parents[2]


def _mypy(path: Path, cache: Path) -> tuple[int, str]:
    done = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-incremental",
            "--cache-dir", str(cache), "--python-version", "3.11", str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_typed_usage_passes_mypy_strict(cache: Path) -> None:
    code, out = _mypy(HERE / "typed_usage.py", cache)
    assert code == 0, out


def test_every_marked_mistake_is_reported_and_nothing_else(cache: Path) -> None:
    source = HERE / "typed_mistakes.py"
    marked = {
        number
        for number, line in enumerate(source.read_text().splitlines(), start=1)
        if line.rstrip().endswith("# expect-error")
    }
    assert len(marked) >= 8
    code, out = _mypy(source, cache)
    assert code == 1, out
    reported = {
        int(m.group(1)) for m in re.finditer(rf"{re.escape(source.name)}:(\d+): error:", out)
    }
    assert reported == marked, out
