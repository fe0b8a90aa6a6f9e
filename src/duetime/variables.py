"""``DUETIME_*`` environment variables: the names the client side reads, and the strict check of
names that the server's settings (:func:`duetime.config.load_settings`) and the CLI's API
commands both make — a variable nobody reads is most likely a misspelling, so it stops the
command with one line (``unknown setting DUETIME_ADMIN_TOKN (did you mean
DUETIME_ADMIN_TOKEN?)``) instead of being silently ignored.

A secret can instead be given in a file, as Kubernetes and Docker mount secrets
(:func:`secret_from_file`): the server's secret settings and the client's API key read the
file variable by the same rules.

Standard library only: the client install (``pip install duetime``) imports it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from duetime.errors import ConfigError

FILE_SUFFIX = "_FILE"
"""``DUETIME_X_FILE`` names a file holding the value of the secret ``DUETIME_X``."""
CLIENT_VARIABLES = frozenset({"DUETIME_URL", "DUETIME_API_KEY", "DUETIME_API_KEY" + FILE_SUFFIX})
"""``DUETIME_*`` variables of the client side (the CLI's API commands, the SDK), not Settings."""
OTHER_PREFIXES = ("DUETIME_TEST_", "DUETIME_BENCH_", "DUETIME_THROWAWAY_", "DUETIME_FAULT_")
"""Prefixes of variables the test suite, benchmarks and scripts read (not the service)."""


def unknown_variables(environ: Iterable[str], known: frozenset[str]) -> list[str]:
    """The ``DUETIME_*`` names in ``environ`` that are neither ``known`` nor under
    :data:`OTHER_PREFIXES`, in order."""
    return [
        name
        for name in environ
        if name.startswith("DUETIME_") and name not in known and not name.startswith(OTHER_PREFIXES)
    ]


def check_variable_names(environ: Mapping[str, str], known: frozenset[str]) -> None:
    """Raise :class:`~duetime.errors.ConfigError` for the first unknown ``DUETIME_*`` variable
    (:func:`unknown_variables`), naming the known one it most likely means."""
    for name in unknown_variables(environ, known):
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown setting {name}{hint}; unset it or fix its name")


def secret_from_file(environ: Mapping[str, str], variable: str) -> str | None:
    """The value of the secret ``variable`` given as a file: the content of the file that
    ``<variable>_FILE`` names, less one trailing newline (as ``echo`` and most editors leave);
    None when ``<variable>_FILE`` is unset or empty.

    Raises :class:`~duetime.errors.ConfigError`, one line naming the variables, when
    ``variable`` is set too (two sources for one secret), or the file cannot be read, or it
    holds nothing.
    """
    named = variable + FILE_SUFFIX
    path = environ.get(named)
    if not path:
        return None
    if environ.get(variable):
        raise ConfigError(f"both {variable} and {named} are set: keep one of them")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{named}={path!r}: cannot read it ({why})") from None
    value = text.removesuffix("\n").removesuffix("\r")
    if not value:
        raise ConfigError(f"{named}={path!r}: the file is empty")
    return value


def client_api_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The tenant API key the environment gives a client: ``DUETIME_API_KEY``, or the content of
    the file ``DUETIME_API_KEY_FILE`` names (:func:`secret_from_file`, whose errors it raises);
    None for neither. ``environ`` replaces ``os.environ`` (tests)."""
    env = os.environ if environ is None else environ
    return secret_from_file(env, "DUETIME_API_KEY") or env.get("DUETIME_API_KEY") or None
