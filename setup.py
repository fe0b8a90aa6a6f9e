"""The client wheel `duetime` (metadata: pyproject.toml). Setuptools ships every module of a
package it ships; the modules below belong to the distribution ``duetime-server`` instead
(packaging/server/setup.py names the same ones): the service's modules inside the two packages
both wheels share. tests/unit/test_distributions.py keeps the two lists equal and this one
exactly what the SDK and CLI do not import; tests/acceptance/test_packaging.py builds both
wheels and checks that they split src/duetime exactly."""

from setuptools import setup
from setuptools.command.build_py import build_py

SERVICE_MODULES = {
    "duetime": frozenset({"graph", "metrics", "retry", "states"}),
    "duetime.observe": frozenset({"endings", "http", "storetime", "tracing"}),
}
"""Modules of the shared packages that only the service imports: the server wheel's."""


class ClientModules(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        found = super().find_package_modules(package, package_dir)
        service = SERVICE_MODULES.get(package, frozenset())
        return [m for m in found if m[1] not in service]


setup(cmdclass={"build_py": ClientModules})
