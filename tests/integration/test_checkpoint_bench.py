"""The checkpoint benchmark still runs end to end (tiny table, one repetition, no timings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import checkpoint
from bench.gen import TableSpec

pytestmark = pytest.mark.integration


def test_checkpoint_benchmark_runs_and_engines_agree(tmp_path: Path) -> None:
    spec = TableSpec(commits=20, active_files=200, remove_every=5, removes_per=2, tail=3)
    row = checkpoint.measure(spec, reps=1, out_dir=tmp_path)
    assert row["files"] == [200]
    for key in (
        "open_s",
        "checkpoint_s",
        "reload_s",
        "peak_mb",
        "total_s",
        "process_process_s",
        "process_peak_mb",
    ):
        assert row[key]["ours"] > 0 and row[key]["theirs"] > 0, key
    markdown = checkpoint.render({"rows": {"tiny": row}, "machine": checkpoint.machine()})
    assert "write the checkpoint" in markdown and "ratio" in markdown
    assert "whole process as users run it" in markdown
