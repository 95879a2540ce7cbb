"""avoidRecentWrites: a due compaction whose every bin would be deferred is not launched
(issue 23.9).

A real fragmented table whose two partitions another writer has just DELETEd from: the run's
conflict-aware planning would defer both, so the controller decides "nothing to do" from its
plan and the newest commits, instead of starting a run (a pod or a SparkApplication on a
cluster) that can only defer; once the writes are older than the window, the run starts. A
partition with small files nobody writes keeps the run going.

Before: a run launched at every cooldown that only deferred.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from tests.support.controller import Controller, compaction, conditions, fragmented, txntable
from txntable.api.conditions import Reason
from txntable.engine import Table

POLICY = compaction(avoidRecentWrites={"within": "10m"})


def _delete_one_file_in(location: Path, parts: set[str]) -> None:
    """Another writer's DELETE: one file removed from each partition of ``parts``."""
    table = Table.open(str(location))
    doomed = {}
    for add in table.snapshot().add_actions():
        part = add.partition_values.get("part")
        if part in parts and part not in doomed:
            doomed[part] = add
    txn = table.transaction()
    for add in doomed.values():
        txn.add(add.to_remove(deletion_timestamp=None, data_change=True))
    txn.commit("DELETE")


def test_every_bin_deferred_launches_nothing_until_the_writes_age(tmp_path: Path) -> None:
    location = tmp_path / "t"
    fragmented(location)  # partitions a and b, 6 small files each
    _delete_one_file_in(location, {"a", "b"})
    now = datetime.now(UTC).replace(microsecond=0)
    c = Controller(txntable(location), at=now)
    tick = c.tick(compaction=[POLICY])
    assert c.launcher.launched == []
    _, reason = conditions(tick)["Compacting"]
    message = {x.type: x for x in tick.status.conditions}["Compacting"].message
    assert reason == Reason.NOTHING_TO_DO
    assert "other writers changed every partition with a bin (2)" in message
    assert str(tick.status.phase) == "Ready"  # nothing is wrong: there is nothing to do yet
    tick = c.tick(now + timedelta(minutes=5), compaction=[POLICY])
    assert c.launcher.launched == []
    # past the window the partitions are quiet again: the run starts
    tick = c.tick(now + timedelta(minutes=11), compaction=[POLICY])
    assert len(c.launcher.launched) == 1 and str(tick.status.phase) == "Compacting"


def test_a_quiet_partition_with_a_bin_keeps_the_run(tmp_path: Path) -> None:
    location = tmp_path / "t"
    fragmented(location)
    _delete_one_file_in(location, {"a"})  # b is quiet
    c = Controller(txntable(location), at=datetime.now(UTC).replace(microsecond=0))
    c.tick(compaction=[POLICY])
    assert len(c.launcher.launched) == 1


def test_without_avoid_recent_writes_the_run_starts(tmp_path: Path) -> None:
    location = tmp_path / "t"
    fragmented(location)
    _delete_one_file_in(location, {"a", "b"})
    c = Controller(txntable(location), at=datetime.now(UTC).replace(microsecond=0))
    c.tick(compaction=[compaction()])
    assert len(c.launcher.launched) == 1


def test_appends_do_not_defer_under_the_default_writes(tmp_path: Path) -> None:
    location = tmp_path / "t"
    fragmented(location)
    Table.open(str(location)).append(pa.table({"id": [1, 2], "part": ["a", "b"]}))
    c = Controller(txntable(location), at=datetime.now(UTC).replace(microsecond=0))
    c.tick(compaction=[POLICY])
    assert len(c.launcher.launched) == 1  # removes defer (the default), appends do not
