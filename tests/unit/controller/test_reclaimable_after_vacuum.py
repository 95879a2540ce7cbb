"""After a VACUUM, "bytes reclaimable by VACUUM" counts only what that VACUUM could not delete.

VACUUM deletes the files whose tombstones were past the retention when it started; the
tombstones themselves stay in the log until a checkpoint expires them. Counting them made the
figure (status ``reclaimableBytes``, ``txntable_table_vacuum_reclaimable_bytes``) and the alert
``TxntableVacuumReclaimableBytesHigh`` stay up after a successful VACUUM. The table is real, its
removes stamped with chosen deletion timestamps; the controller is ``Operator.reconcile``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry

from tests.support.controller import MemoryLauncher
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine import Table
from txntable.engine.read.summary import TableSummary
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.reconcile.health import observe_summary, swept_before, without_swept

DAY_MS = 86_400_000
NOW = datetime.now(UTC).replace(microsecond=0)  # reclaimable tombstones are judged on the clock
NOW_MS = int(NOW.timestamp() * 1000)


def removed(path: Path) -> tuple[Table, dict[str, int]]:
    """A table (default 7-day retention) with one file removed 30 days ago and one 8 days ago;
    returns the sizes of the removed files by age."""
    t = Table.create(str(path), pa.schema([("id", pa.int64())]))
    for i in range(3):
        t.append(pa.table({"id": list(range(i * 100, i * 100 + 10 * (i + 1)))}))
    live = list(t.snapshot().add_actions())
    sizes = {}
    for days, action in ((30, live[0]), (8, live[1])):
        txn = t.transaction()
        txn.add(action.to_remove(deletion_timestamp=NOW_MS - days * DAY_MS, data_change=True))
        txn.commit("DELETE")
        sizes[f"{days}d"] = action.size
    assert sizes["30d"] != sizes["8d"]
    return t, sizes


def test_a_vacuum_takes_what_it_deleted_out_of_the_figure(tmp_path: Path) -> None:
    t, sizes = removed(tmp_path / "t")
    summary = TableSummary.from_snapshot(t.snapshot())
    health = observe_summary(summary, 1, now_ms=NOW_MS)
    assert health.reclaimable_bytes == sizes["30d"] + sizes["8d"]
    # a VACUUM a day ago (7-day retention): it deleted the file removed 30 days ago
    cutoff = swept_before(health.file_retention_ms, None, NOW - timedelta(days=1))
    assert cutoff is not None
    after = without_swept(health, summary, cutoff, now_ms=NOW_MS)
    assert after.reclaimable_bytes == sizes["8d"]
    # a policy retention of 10 days: that VACUUM kept both; one of 40 days, a day ago, too
    for retention_days, expected in ((10, sizes["8d"]), (40, sizes["30d"] + sizes["8d"])):
        cutoff = swept_before(health.file_retention_ms, retention_days * 86_400, NOW)
        assert cutoff is not None
        assert without_swept(health, summary, cutoff, now_ms=NOW_MS).reclaimable_bytes == expected
    # a VACUUM just now deleted both; a broken retention property: nothing known
    cutoff = swept_before(health.file_retention_ms, None, NOW)
    assert cutoff is not None
    assert without_swept(health, summary, cutoff, now_ms=NOW_MS).reclaimable_bytes == 0
    assert swept_before(None, None, NOW) is None


def resources(location: Path, **vacuum: Any) -> tuple[TxnTable, CompactionPolicy]:
    table = TxnTable.from_manifest(
        table_manifest(
            "events", location, metadata={"uid": "uid-1"}, compactionPolicyRef={"name": "compact"}
        )
    )
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "compact", triggers={"smallFiles": 100}, vacuum={"enabled": True, **vacuum}
        )
    )
    return table, policy


def reconcile(table: TxnTable, policy: CompactionPolicy) -> tuple[int | None, float | None]:
    clock = [NOW]
    metrics = ControllerMetrics(CollectorRegistry())
    operator = Operator(
        config=Config(default_backend="local"),
        launchers=lambda backend: MemoryLauncher(clock),
        clock=lambda: clock[0],
        metrics=metrics,
    )
    status = operator.reconcile(table, [policy], []).status
    metric = metrics.registry.get_sample_value(
        "txntable_table_vacuum_reclaimable_bytes", {"namespace": "default", "table": "events"}
    )
    return status.reclaimable_bytes, metric


def test_status_and_metric_fall_after_the_last_vacuum(tmp_path: Path) -> None:
    _, sizes = removed(tmp_path / "t")
    table, policy = resources(tmp_path / "t")
    both = sizes["30d"] + sizes["8d"]
    assert reconcile(table, policy) == (both, both)  # never vacuumed
    vacuumed = replace(
        table, status=replace(table.status, last_vacuum_time=NOW - timedelta(days=1))
    )
    assert reconcile(vacuumed, policy) == (sizes["8d"], sizes["8d"])
    # a dry-run policy deleted nothing: the figure stays
    _, dry = resources(tmp_path / "t", dryRun=True)
    assert reconcile(vacuumed, dry) == (both, both)


def test_a_removal_just_before_a_vacuum_is_swept_by_it(tmp_path: Path) -> None:
    """A table with a 1-second retention whose file was removed a minute before its VACUUM
    started (the e2e tier's VACUUM-only run): that VACUUM deleted it. With an hour of slack for
    writers' clocks the figure kept it, and a policy with a short ``interval`` launched a
    VACUUM run (a Spark Job on the real node) at every interval for an hour, each deleting
    nothing."""
    t = Table.create(
        str(tmp_path / "t"),
        pa.schema([("id", pa.int64())]),
        properties={"delta.deletedFileRetentionDuration": "interval 1 second"},
    )
    t.append(pa.table({"id": [1, 2]}))
    (action,) = t.snapshot().add_actions()
    txn = t.transaction()
    txn.add(action.to_remove(deletion_timestamp=NOW_MS - 60_000, data_change=True))
    txn.commit("DELETE")
    summary = TableSummary.from_snapshot(t.snapshot())
    health = observe_summary(summary, 1, now_ms=NOW_MS)
    assert health.reclaimable_bytes == action.size
    cutoff = swept_before(health.file_retention_ms, None, NOW - timedelta(seconds=5))
    assert cutoff is not None
    assert without_swept(health, summary, cutoff, now_ms=NOW_MS).reclaimable_bytes == 0
    table, policy = resources(tmp_path / "t", interval="1s")
    vacuumed = replace(
        table, status=replace(table.status, last_vacuum_time=NOW - timedelta(seconds=5))
    )
    assert reconcile(vacuumed, policy) == (0, 0)
