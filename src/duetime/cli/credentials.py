"""``duetime credential put|list|get|delete``: the tenant's named credentials, through the API.

A secret value is read from a file (``--value @path``), from stdin (``--value -``, or no
``--value`` with stdin not a terminal) or from a prompt that does not echo; given on the command
line it would stay in the shell's history. Answers show the name, the kind and the fingerprint,
never a value."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from duetime.cli.common import ApiKeyOption, UrlOption, fail, text_arg
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.sdk.client import DEFAULT_URL
from duetime.sdk.credentials import BasicCredential, HeaderCredential

credential_app = typer.Typer(
    help="Named credentials webhooks authenticate with (write-only).", no_args_is_help=True
)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The credential's name.")]
COLUMNS = ["name", "kind", "fingerprint", "updated_at"]


def _secret(value: str | None, flag: str, prompt: str) -> str:
    """The secret: ``value`` as :func:`text_arg` reads it (``@file``, ``-``), else stdin when it
    is not a terminal, else a prompt without echo. One trailing new line is dropped."""
    if value is None:
        text = sys.stdin.read() if not sys.stdin.isatty() else typer.prompt(prompt, hide_input=True)
    else:
        text = text_arg(value, flag)
    text = text.removesuffix("\n").removesuffix("\r")
    if not text and flag == "--value":
        raise fail(f"{flag} is empty", 2)
    return text


@credential_app.command("put")
def credential_put(
    name: NameArg,
    header: Annotated[
        str | None,
        typer.Option(help="A header credential: the header's name (e.g. Authorization)."),
    ] = None,
    value: Annotated[
        str | None,
        typer.Option(help="The header's value: @file, or - (stdin); prompted for when left out."),
    ] = None,
    basic_user: Annotated[
        str | None, typer.Option(help="A Basic auth credential: the user name.")
    ] = None,
    password: Annotated[
        str | None,
        typer.Option(
            help="The Basic auth password: @file, or - (stdin); prompted for if left out."
        ),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create or replace a named credential: --header NAME [--value ...] or --basic-user USER
    [--password ...]. A target uses it with "auth": {"credential": "NAME"}."""
    if (header is None) == (basic_user is None):
        raise fail("give --header NAME (a header credential) or --basic-user USER, one of them", 2)
    spec: HeaderCredential | BasicCredential
    if header is not None:
        if password is not None:
            raise fail("--password goes with --basic-user; a header credential takes --value", 2)
        spec = HeaderCredential(header=header, value=_secret(value, "--value", f"{header} value"))
    else:
        if value is not None:
            raise fail("--value goes with --header; a Basic credential takes --password", 2)
        assert basic_user is not None
        spec = BasicCredential(
            username=basic_user, password=_secret(password, "--password", "password")
        )
    with connected(url, api_key) as client:
        emit(output, client.put_credential(name, spec).model_dump(mode="json"))


@credential_app.command("list")
def credential_list(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Every named credential: name, kind, fingerprint, times (never a value)."""
    with connected(url, api_key) as client:
        items = [c.model_dump(mode="json", exclude={"created"}) for c in client.list_credentials()]
    emit(output, {"items": items}, columns=COLUMNS)


@credential_app.command("get")
def credential_get(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """One named credential: name, kind, fingerprint, times."""
    with connected(url, api_key) as client:
        emit(output, client.get_credential(name).model_dump(mode="json", exclude={"created"}))


@credential_app.command("delete")
def credential_delete(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Delete a named credential; tasks that use it fail until it is put again."""
    with connected(url, api_key) as client:
        client.delete_credential(name)
    emit(output, {"name": name, "deleted": True})
