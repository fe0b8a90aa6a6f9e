"""How an API command reaches the server, and what it says when it cannot: :func:`connected`.

- ``--url`` (``DUETIME_URL``): ``http://host:port`` or ``https://...``; a bare ``host:port`` is
  read as ``http://host:port``; another scheme, or no host, is a usage error (exit 2).
- ``--api-key`` (``DUETIME_API_KEY``, or the file ``DUETIME_API_KEY_FILE`` names).
- The environment's ``DUETIME_*`` names are checked as strictly as ``serve`` checks them
  (:func:`check_client_environment`): a misspelt variable is one line naming the one it most
  likely means (exit 1), never silently ignored.
- Everything that goes wrong is one line on stderr with the exit status of README's table: the
  API's problems by class (:data:`duetime.cli.common.EXIT_CODES`); no answer, or an answer that
  is not duetime's (an HTML page, a 404 without a problem document, JSON of another shape: the
  SDK's models refuse it, or a field it reads is missing), 5, with a hint at
  ``--url``/``DUETIME_URL``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pydantic

from duetime.cli.common import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    api_client,
    exit_code,
    fail,
)
from duetime.errors import DuetimeError
from duetime.sdk.errors import ApiError, TransportError
from duetime.variables import (
    CLIENT_VARIABLES,
    check_variable_names,
    client_api_key,
    unknown_variables,
)

if TYPE_CHECKING:
    from duetime.sdk.client import Client

CLIENT_SETTINGS = frozenset({"DUETIME_LOG_LEVEL", "DUETIME_LOG_FORMAT", "DUETIME_METRICS_TOKEN"})
"""Server settings that client commands read too (``worker``'s logging, ``doctor``'s token)."""

WHERE = "point --url or DUETIME_URL at a duetime server (duetime serve prints its URL)"
"""The hint every 'cannot reach' and 'not a duetime answer' line ends with."""


def server_url(url: str) -> str:
    """``url`` as the client uses it: ``http(s)://host[:port][/path]``, a bare ``host[:port]``
    read as ``http://``. Raises ``typer.Exit`` (2) with one line for anything else."""
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        port, parts = -1, None
    if parts is None or port == -1 or not parts.hostname or any(c.isspace() for c in text):
        raise fail(f"--url {url!r} is not a URL: give http://host:port", EXIT_USAGE)
    if parts.scheme not in ("http", "https"):
        raise fail(f"--url {url!r}: duetime speaks http:// or https://", EXIT_USAGE)
    return text.rstrip("/")


def check_client_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`~duetime.errors.ConfigError` for a ``DUETIME_*`` variable that neither the
    client nor (when installed) the server reads. The server's names are looked up only when
    the client's own do not account for every variable: that costs an import of its settings."""
    env = os.environ if environ is None else environ
    known = CLIENT_VARIABLES | CLIENT_SETTINGS
    if not unknown_variables(env, known):
        return
    # A variable the server reads is fine in a client's environment (one shell for both); the
    # client install has no server settings to know.
    with contextlib.suppress(ImportError):
        known |= importlib.import_module("duetime.config").SETTINGS_VARIABLES
    check_variable_names(env, known)


def api_key_given(api_key: str | None) -> str | None:
    """``--api-key`` when given, else the environment's key (:func:`client_api_key`, whose
    :class:`~duetime.errors.ConfigError` it raises)."""
    # The environment is read even under the flag, as serve reads its files under flags: a key
    # and its _FILE both set is refused whichever would win.
    from_environment = client_api_key()
    return from_environment if api_key is None else api_key


def from_duetime(error: ApiError) -> bool:
    """Whether the answer carried a problem document, as every duetime error answer does."""
    return "status" in error.problem and "title" in error.problem


@contextlib.contextmanager
def reported(url: str) -> Iterator[None]:
    """Turn what goes wrong talking to the server at ``url`` into one line on stderr and its
    exit status (see the module)."""
    try:
        yield
    except ApiError as exc:
        if not from_duetime(exc):
            raise fail(
                f"{url} answered {exc.status} {exc.title} without a duetime problem document: "
                f"is it duetime? {WHERE}",
                EXIT_UNREACHABLE,
            ) from None
        raise fail(str(exc), exit_code(exc)) from None
    except TransportError as exc:
        raise fail(f"{exc}; is duetime serving there? {WHERE}", EXIT_UNREACHABLE) from None
    except DuetimeError as exc:
        raise fail(str(exc), exit_code(exc)) from None
    except (pydantic.ValidationError, KeyError, TypeError) as exc:
        # A 2xx answer the SDK cannot read: another server, or one this client does not know.
        what = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise fail(
            f"{url} answered something that is not a duetime API answer ({what}): is it "
            f"duetime, of a version this client speaks? {WHERE}",
            EXIT_UNREACHABLE,
        ) from None


@contextlib.contextmanager
def connected(url: str, api_key: str | None) -> Iterator[Client]:
    """The SDK client of an API command, at ``url`` (see :func:`server_url`), after the
    environment check; whatever the command's calls raise is :func:`reported`."""
    base = server_url(url)
    with reported(base):
        check_client_environment()
        with api_client(base, api_key_given(api_key)) as client:
            yield client
