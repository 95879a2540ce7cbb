"""``bench.process`` measures the process it starts, not the benchmark that starts it."""

from __future__ import annotations

import pytest
from bench.process import run_cli, run_script


def test_the_peak_is_the_childs_own() -> None:
    """A child that allocates 200 MB reports about that; one that does not reports far less,
    although the parent is the same (a peak carried over from the parent would not differ)."""
    grow = "b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"
    big = run_script(grow)
    small = run_script("pass")
    assert big["peak_mb"] > 200 > small["peak_mb"] + 100
    assert big["process_s"] > 0


def test_the_command_runs_as_the_console_script_does() -> None:
    done = run_cli(["--version"])
    assert done["stdout"].startswith("txntable")
    got = run_script("import sys\nprint(sys.argv[1:])", ["a", "b"], {"X_BENCH": "1"})
    assert got["stdout"].strip() == "['a', 'b']"


def test_a_failing_child_is_an_error_with_its_last_words() -> None:
    with pytest.raises(RuntimeError, match=r"exited 3: .*gone"):
        run_script("import sys\nprint('gone', file=sys.stderr)\nsys.exit(3)")
