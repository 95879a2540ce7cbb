"""``python -m txntable`` runs the controller and takes no arguments: ``--help`` says what it
is, any other argument is refused, and neither starts a controller (before, both did)."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txntable", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/nonexistent"},
        check=False,
    )


def test_help_says_what_it_is_and_starts_nothing() -> None:
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m txntable")
    assert "txntable --help" in done.stdout and done.stderr == ""


def test_an_argument_is_refused_with_one_error_line() -> None:
    done = _run("optimize", "/tmp/t")
    assert done.returncode == 2
    first = done.stderr.splitlines()[0]
    assert first == "error: python -m txntable takes no arguments (got optimize /tmp/t)"
    assert "kopf." not in done.stderr  # no Kopf logger ever spoke: no controller started
