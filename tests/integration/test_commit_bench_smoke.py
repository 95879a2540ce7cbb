"""The commit benchmark still runs end to end (a few commits, two processes, no timing checks).

It checks what the benchmark itself checks after every run: no lost or duplicated commit for
either engine, contiguous versions, and both engines agreeing on the final files.
"""

from __future__ import annotations

import pytest
from bench import commit_throughput

pytestmark = pytest.mark.integration


def test_commit_benchmark_runs_and_loses_nothing() -> None:
    result = commit_throughput.measure(count=6, processes=2)
    assert set(result["rows"]) == {
        f"{scenario}/{engine}"
        for scenario in ("sequential", "contended")
        for engine in commit_throughput.ENGINES
    }
    for name, row in result["rows"].items():
        assert row["commits"] == 6, name
        assert row["versions_contiguous"] and row["lost_commits"] == 0, name
        assert row["rows"] == 6 and row["duplicate_rows"] == 0, name
        assert row["engines_agree"], name
    markdown = commit_throughput.render(result)
    assert "| contended | ours |" in markdown and "passed" in markdown
