"""``bench.deltaspark`` (``make bench``) keeps working: its checkpoint and VACUUM comparisons run
on tiny tables with the session's delta-spark (no second JVM), and both engines agree where the
benchmark says they must (VACUUM deletes and keeps the same files). Its OPTIMIZE comparison starts
our Spark executor's own session and is left to ``make bench``; no timing is asserted."""

from __future__ import annotations

import pytest
from bench import deltaspark as side_by_side
from bench import gen

from tests.deltaspark.client import DeltaSpark

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark]


def test_vacuum_and_checkpoint_side_by_side(delta_spark: DeltaSpark) -> None:
    vacuum = side_by_side.run_vacuum(delta_spark, 2, 10)
    assert "error" not in vacuum["ours"] and "error" not in vacuum["deltaspark"], vacuum
    assert vacuum["same_files_kept"], vacuum
    assert vacuum["ours"]["deleted"] == vacuum["deltaspark"]["deleted"] > 0, vacuum
    assert vacuum["deltaspark"]["peak_rss_mb"] > 0 and vacuum["ours"]["peak_rss_mb"] > 0

    spec = gen.TableSpec(commits=30, active_files=200, partitions=2, checkpoint=False, tail=0)
    checkpoint = side_by_side.run_checkpoint(delta_spark, spec)
    assert "error" not in checkpoint["ours"], checkpoint
    assert "error" not in checkpoint["deltaspark"], checkpoint
    assert checkpoint["ours"]["checkpoint_bytes"] > 0
