"""A throwaway PostgreSQL cluster of its own, for tests that restart or stop the server.

The machine's shared server serves other tests in parallel, so a test that restarts PostgreSQL
starts its own cluster from the installed binaries (``/usr/lib/postgresql/*/bin`` or ``initdb``
on ``PATH``) in a temporary directory, on a free loopback port, trust authentication, as the
``postgres`` user when running as root (PostgreSQL refuses to run as root) — as ``scripts/services``
does for the whole suite.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from duetime.bench.harness import free_port


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries, or no way to run them here."""


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if found and Path(found[-1], "initdb").exists():
        return Path(found[-1])
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PgUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl): install PostgreSQL "
        "(apt-get install postgresql)"
    )


class PgCluster:
    """One cluster in a new temporary directory (under the system's, not a test's ``tmp_path``:
    the ``postgres`` user must be able to reach it): :meth:`init`, :meth:`start`,
    :meth:`restart`, :meth:`stop`, :meth:`destroy`. :attr:`url` names the ``postgres`` database
    (create others with :meth:`create_database`)."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="duetime-faultpg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root without runuser: cannot start PostgreSQL")
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}")

    def init(self) -> PgCluster:
        if self._as:
            shutil.chown(self.dir, "postgres")
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        return self

    def start(self) -> None:
        # fsync off: only an OS crash could lose data, and none is played here; commits stay
        # synchronous, so a stop "immediate" (a server crash) keeps every acknowledged commit.
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "server.log"),
            "-w",
            "-o",
            options,
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends sessions and shuts down cleanly; ``immediate`` is a crash."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def create_database(self, name: str) -> str:
        host = ("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres")
        self._run(str(self.bindir / "createdb"), *host, name)
        return self.database_url(name)

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError):  # not running
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
