"""Every ``txntable`` command line the docs show exists: its subcommand and every flag it names
are in the real argparse parser, and a line that is a concrete command (no ``[...]``
synopsis, no ``|`` alternatives) parses as written, placeholders (``URI``, ``<table-uri>``)
standing for a path. Flags that stop existing, or are renamed, fail here instead of in a
reader's shell."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from txntable.cli.main import build_parser

REPO = Path(__file__).resolve().parents[3]
PAGES = sorted(
    [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "examples").rglob("*.yaml")]
)
INLINE = re.compile(r"`(txntable (?:--?[a-z]|[a-z])[^`]*)`")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PLACEHOLDER = re.compile(r"^(<[^>]+>|[A-Z][A-Z_]*)$")


def snippets(text: str) -> list[tuple[str, bool]]:
    """Inline ``txntable ...`` code (a mention: False), and block lines that start with
    ``txntable `` (a command: True), with the indented ``[...]`` lines of a synopsis joined to
    them and comments dropped."""
    found = [(m.group(1), False) for m in INLINE.finditer(text)]
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        current: str | None = None
        for line in block.splitlines():
            if line.startswith("txntable "):
                if current is not None:
                    found.append((current, True))
                current = line.split("  #")[0].strip()
            elif current is not None and line.startswith(" ") and line.strip().startswith("["):
                current += " " + line.strip()
            else:
                if current is not None:
                    found.append((current, True))
                current = None
        if current is not None:
            found.append((current, True))
    return found


def subparsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = build_parser()
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, dict(action.choices)


CASES = [
    pytest.param(line, whole, id=f"{page.relative_to(REPO)}:{line[:60]}")
    for page in PAGES
    for line, whole in snippets(page.read_text())
]


def test_the_docs_show_commands() -> None:
    lines = [p.values[0] for p in CASES]
    assert len(lines) >= 15
    assert any(line.startswith("txntable run --local") for line in lines)


@pytest.mark.parametrize(("line", "whole"), CASES)
def test_a_documented_command_line_matches_the_parser(line: str, whole: bool) -> None:
    parser, commands = subparsers()
    words = line.split()
    if words[1].startswith("-"):  # txntable --version / --help
        assert words[1] in parser._option_string_actions, line
        return
    sub = commands.get(words[1])
    assert sub is not None, f"no subcommand {words[1]!r}: {line}"
    unknown = [f for f in FLAG.findall(line) if f not in sub._option_string_actions]
    assert not unknown, f"{line}: {unknown} not among {sorted(sub._option_string_actions)}"
    if not whole or any(c in line for c in "[|") or "..." in line or "--help" in words:
        return  # a mention or a synopsis: its flags exist, which is what can be checked
    argv = ["/tmp/table" if PLACEHOLDER.match(w) else w for w in shlex.split(line)[1:]]
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{line!r} does not parse (exit {exc.code})")
