"""The start-up benchmark measures the process it names, not the benchmark's own interpreter.

A child forked from a big interpreter inherits that interpreter's peak RSS (the first version of
``bench/startup.py`` reported 89 MB for ``python -c pass``); the figures come from GNU time
instead. No timing is asserted, only which process the memory belongs to.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench import startup

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="needs GNU time"),
]


def test_peak_rss_is_the_childs_own() -> None:
    big = bytearray(300 * 1024 * 1024)  # this process is far bigger than the child below
    small = startup.measure([sys.executable, "-c", "pass"])
    grown = startup.measure(
        [
            sys.executable,
            "-c",
            "b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])",
        ]
    )
    del big
    assert small["peak_mb"] < 100 < 200 <= grown["peak_mb"] < 300
    assert small["wall_s"] > 0 and small["cpu_s"] >= 0


def test_every_case_runs_and_renders(tmp_path: Path) -> None:
    commands = startup.cases(startup._small_table(tmp_path))
    samples = {name: [startup.measure(argv)] for name, argv in commands.items()}
    result = {
        "samples": samples,
        "load": [1.0, 1.0, 1.0],
        "python": "3",
        "cpus": 2,
        "measured": "now",
    }
    markdown = startup.render(result)
    assert markdown.count("\n| `") == len(commands)
    assert "| `import deltalake` |" in markdown and "| `txntable inspect TABLE` |" in markdown
