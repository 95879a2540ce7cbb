"""The shell blocks of a Markdown document, as the install guide's tests read them.

docs/install.md is tested twice: its offline blocks by tests/unit/deploy/test_install_doc.py, its
``# needs a cluster`` blocks on the real node by tests/e2e/test_install_doc.py. Both read the
document's blocks the same way, from here.
"""

from __future__ import annotations

import re

#: how a block that needs more than this machine says so in its first line
NEEDS_CLUSTER, NEEDS_DOCKER = "# needs a cluster", "# needs docker"


def blocks(text: str) -> list[str]:
    return re.findall(r"```(?:sh|bash|shell|console)\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[str]:
    """Logical command lines: continuations joined, comments and blanks dropped."""
    out, current = [], ""
    for line in block.splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        out.append((current + line).strip())
        current = ""
    assert not current, "dangling line continuation"
    return out


def sections(text: str) -> list[tuple[str, str]]:
    """(the heading above it, block) for every shell block, in document order."""
    out: list[tuple[str, str]] = []
    heading = ""
    for part in re.split(r"(```(?:sh|bash|shell|console)\n.*?```)", text, flags=re.S):
        if part.startswith("```"):
            (block,) = blocks(part)
            out.append((heading, block))
            continue
        titles = re.findall(r"^#{1,6} (.+)$", part, flags=re.M)
        if titles:
            heading = titles[-1].strip()
    return out
