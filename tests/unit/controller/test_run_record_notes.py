"""A finished compaction run's record says what conflict-aware planning did: the partitions it
deferred because other writers wrote them recently, and the rewritten bytes it dropped. The
table's ``lastCompaction.message`` and the run's Event both carry it, so an operator on call sees
why a run left small files behind (docs/optimize.md, avoidRecentWrites).

Drives ``Operator.reconcile`` with the in-memory launcher of tests.support.controller on a real
table.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tests.support.controller import T0, Harness
from txntable.launch import RunState

RESULT = {
    "version": 7,
    "numFilesRemoved": 4,
    "numFilesAdded": 1,
    "binsCommitted": 1,
    "deferredPartitions": [{"partitionValues": {"part": "b"}}],
    "numBytesDropped": 0,
}


def test_the_finished_run_record_and_event_name_the_deferred_partitions(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.tick(T0)
    (name,) = h.launcher.launched
    ended = T0 + timedelta(seconds=5)
    run = h.launcher.runs[name]
    h.launcher.runs[name] = replace(run, state=RunState.SUCCEEDED, finished=ended, result=RESULT)
    tick = h.tick(ended + timedelta(seconds=1))
    record = tick.status.last_compaction
    assert record is not None and record.run_name == name
    assert record.outcome is not None and record.outcome.value == "Succeeded"
    assert record.message is not None
    assert "1 partition(s) deferred, written recently by other writers (part=b)" in record.message
    (said,) = h.reasons("RunSucceeded")
    assert "partition(s) deferred" in said and "part=b" in said


def test_a_run_that_deferred_nothing_says_nothing_of_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.tick(T0)
    (name,) = h.launcher.launched
    ended = T0 + timedelta(seconds=5)
    quiet = {k: v for k, v in RESULT.items() if k != "deferredPartitions"}
    h.launcher.runs[name] = replace(
        h.launcher.runs[name], state=RunState.SUCCEEDED, finished=ended, result=quiet
    )
    record = h.tick(ended + timedelta(seconds=1)).status.last_compaction
    assert record is not None and "deferred" not in (record.message or "")
    assert all("deferred" not in m for _, m in h.events)
