"""README's list of commands ("The CLI", "Every command, by group") names exactly the commands
the app has: a command added, renamed or removed without the README fails here."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from cli_helpers import leaves

from duetime import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> set[tuple[str, ...]]:
    """The commands README's list names: ``group a|b|c`` spans name a group's commands, any
    other span a command of the root (its arguments after the name)."""
    text = README.read_text()
    section = text[text.index("## The CLI") :]
    section = section[: section.index("\n## ")]
    listing = section[section.index("Every command, by group:") :]
    listing = listing[: listing.index("\n\n", listing.index("\n- "))]
    groups = {words[0] for words in leaves(typer.main.get_command(cli.app)) if len(words) > 1}
    found: set[tuple[str, ...]] = set()
    for span in re.findall(r"`([^`]+)`", listing):
        name, _, rest = span.partition(" ")
        if name in groups:
            found |= {(name, command) for command in rest.split("|")}
        else:
            found.add((name,))
    return found


def test_readme_names_every_command_and_no_other() -> None:
    app = set(leaves(typer.main.get_command(cli.app)))
    listed = readme_commands()
    assert sorted(app - listed) == [], "commands missing from README's list"
    assert sorted(listed - app) == [], "README lists commands the app does not have"
