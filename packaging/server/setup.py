"""The service's wheel `duetime-server` (metadata: pyproject.toml beside this file), built from
the repository's src tree (``src`` here links to it). It ships the service's packages and, of the
two packages it shares with the client wheel ``duetime`` (the package root and
``duetime.observe``), only the modules below; the rest of those come with the client (the
repository's setup.py names the same modules)."""

from setuptools import setup
from setuptools.command.build_py import build_py

SERVICE_MODULES = {
    "duetime": frozenset({"graph", "metrics", "retry", "states"}),
    "duetime.observe": frozenset({"endings", "http", "storetime", "tracing"}),
}
"""Modules of the shared packages that only the service imports: this wheel's."""


class ServerModules(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        found = super().find_package_modules(package, package_dir)
        if package not in SERVICE_MODULES:
            return found
        return [m for m in found if m[1] in SERVICE_MODULES[package]]


setup(cmdclass={"build_py": ServerModules})
