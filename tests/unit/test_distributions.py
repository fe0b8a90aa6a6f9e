"""The two distributions built from src/duetime agree with each other and with the code: the
client wheel ``duetime`` (pyproject.toml, setup.py) and the service's ``duetime-server``
(packaging/server/) leave the same modules of their shared packages to the service, exactly the
ones the SDK and the CLI never import, and carry one version. The wheels themselves are built
and compared with the source tree in tests/acceptance/test_packaging.py."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

import grimp

from duetime.version import __version__

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "packaging" / "server"


def _service_modules(setup_py: Path) -> dict[str, frozenset[str]]:
    """``SERVICE_MODULES`` of a setup.py, evaluated without running ``setup()``."""
    tree = ast.parse(setup_py.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SERVICE_MODULES":
            value = eval(compile(ast.Expression(node.value), str(setup_py), "eval"))
            assert isinstance(value, dict)
            return value
    raise AssertionError(f"{setup_py} has no SERVICE_MODULES")


def _project(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _client_imports() -> set[str]:
    graph = grimp.build_graph("duetime")
    todo = ["duetime", "duetime.__main__"] + [
        m for m in graph.modules if m.startswith(("duetime.sdk", "duetime.cli"))
    ]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.find_modules_directly_imported_by(module))
    return seen


def test_both_setups_give_the_service_the_same_modules() -> None:
    assert _service_modules(ROOT / "setup.py") == _service_modules(SERVER / "setup.py")


def test_service_modules_are_exactly_what_the_client_never_imports() -> None:
    imported = _client_imports()
    for package, modules in _service_modules(ROOT / "setup.py").items():
        folder = ROOT / "src" / package.replace(".", "/")
        here = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        assert modules <= here, (package, sorted(modules - here))
        unused = {m for m in here if f"{package}.{m}" not in imported}
        assert modules == unused, (package, sorted(modules ^ unused))


def test_client_wheel_has_every_package_the_client_imports() -> None:
    client = _project(ROOT / "pyproject.toml")
    assert client["name"] == "duetime"
    with (ROOT / "pyproject.toml").open("rb") as f:
        shipped = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    outside = {
        m.rsplit(".", 1)[0]
        for m in _client_imports()
        if not m.startswith(("duetime.sdk", "duetime.cli")) and m.count(".") > 1
    }
    assert outside <= set(shipped), sorted(outside - set(shipped))


def test_one_version_pinned_both_ways() -> None:
    client, server = _project(ROOT / "pyproject.toml"), _project(SERVER / "pyproject.toml")
    assert server["name"] == "duetime-server"
    assert client["version"] == server["version"] == __version__
    assert client["optional-dependencies"]["server"] == [f"duetime-server=={__version__}"]
    assert f"duetime=={__version__}" in server["dependencies"]
    # The checkout's dev install has the service's dependencies from the server's file (bootstrap)
    # and never names duetime-server, which no package index is asked for.
    assert not any("duetime" in d for d in client["optional-dependencies"]["dev"])


def test_the_server_wheel_is_built_from_the_src_tree() -> None:
    """``packaging/server/src`` is a symbolic link to the repository's src tree: a copy or a
    file holding the path would build a wheel of other code, or none (setuptools: "'src' does
    not exist or is not a directory")."""
    link = SERVER / "src"
    assert link.is_symlink(), f"{link} must be a symbolic link: ln -s ../../src {link}"
    assert link.readlink() == Path("../../src")
    assert link.resolve() == ROOT / "src"
