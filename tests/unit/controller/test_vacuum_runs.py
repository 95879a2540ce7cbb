"""The VACUUM-only run as the controller builds, names, launches and counts it: a run of kind
``vacuum`` (``txntable.jobs.vacuum``, the optimize job with ``--vacuum-only``) with the policy's
VACUUM settings, and its own ``kind`` label in the run metrics."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.conditions import Reason
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.requests import vacuum_request
from txntable.jobs import optimize as optimize_job
from txntable.launch import LocalLauncher, RunKind
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.reconcile.decide import Decision

WHEN = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def policy(**vacuum: Any) -> CompactionPolicy:
    return CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "tidy",
            namespace="lake",
            triggers={"smallFiles": 2},
            vacuum={"enabled": True, **vacuum},
            spark={"backend": "Local"},
        )
    )


def table() -> TxnTable:
    return TxnTable.from_manifest(
        table_manifest(
            "sales",
            "s3://bucket/sales",
            namespace="lake",
            metadata={"uid": "uid-1"},
            storage={"options": {"region": "x"}},
        )
    )


def decision(attempt: int = 0) -> Decision:
    return Decision(True, Reason.TRIGGERED, "go", WHEN, "reclaimable", attempt=attempt)


def test_the_request_is_a_vacuum_run_with_the_policys_settings() -> None:
    req = vacuum_request(table(), policy(retention="10d", dryRun=True), decision(), Config())
    assert req.kind is RunKind.VACUUM and req.name.startswith("vac-sales-tidy-")
    assert req.labels["txntable.io/kind"] == "vacuum"
    args = list(req.args)
    assert args[0] == "s3://bucket/sales"
    assert args[args.index("--vacuum-retention") + 1] == "interval 864000 seconds"
    assert "--vacuum-dry-run" in args
    assert args[args.index("--storage-option") + 1] == "region=x"
    assert args[args.index("--run-id") + 1] == req.name
    assert not {"--options-json", "--target-size", "--zorder-by", "--where", "--vacuum"} & set(args)
    # the table's own retention unless the policy names one; a retry is a new run
    plain = vacuum_request(table(), policy(), decision(attempt=1), Config())
    assert "--vacuum-retention" not in plain.args and "--vacuum-dry-run" not in plain.args
    assert plain.name.endswith("-r1") and plain.name != req.name
    # the job every launcher starts for it, and the flags it accepts
    command = LocalLauncher(Path("/nonexistent")).command(req)
    assert command[:3] == [sys.executable, "-m", "txntable.jobs.vacuum"]
    parser = argparse.ArgumentParser()
    optimize_job.add_arguments(parser)
    parsed = parser.parse_args([*req.args, "--vacuum-only"])
    assert parsed.vacuum_only and parsed.vacuum_dry_run and parsed.master == "local[2]"


def test_vacuum_runs_are_counted_under_their_own_kind() -> None:
    metrics = ControllerMetrics(CollectorRegistry())
    result = {
        "vacuumOnly": True,
        "numFilesRemoved": 0,
        "numFilesAdded": 0,
        "vacuum": {"numFiles": 3, "numDeleted": 3, "bytes": 300, "dryRun": False},
    }
    metrics.run_finished("lake", "sales", "vacuum", "Succeeded", seconds=2.0, result=result)
    get = metrics.registry.get_sample_value
    labels = {"namespace": "lake", "table": "sales", "kind": "vacuum"}
    assert get("txntable_maintenance_runs_total", {**labels, "outcome": "succeeded"}) == 1
    assert get("txntable_vacuum_files_deleted_total", labels) == 3
    assert get("txntable_vacuum_bytes_deleted_total", labels) == 300
    assert get("txntable_vacuum_files_deleted_total", {**labels, "kind": "other"}) is None


def test_health_reports_the_retention_and_the_newest_removal(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.support.health_oracle import observe
    from txntable.engine import Table

    props = {"delta.deletedFileRetentionDuration": "interval 2 days"}
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), [], props)
    for i in range(3):
        t.append(pa.table({"id": [i]}))
    assert observe(t.snapshot(), 1).newest_removal_ms is None  # nothing removed yet
    live = list(t.snapshot().add_actions())
    for stamp, action in ((5_000, live[0]), (9_000, live[1])):
        txn = t.transaction()
        txn.add(action.to_remove(deletion_timestamp=stamp, data_change=True))
        txn.commit("DELETE")
    health = observe(t.snapshot(), 1, now_ms=10_000)
    assert health.file_retention_ms == 2 * 86_400_000
    assert health.newest_removal_ms == 9_000


def test_a_failed_vacuum_run_backs_off_and_a_succeeded_one_waits_for_the_interval(
    tmp_path: Path,
) -> None:
    """Through ``Operator.reconcile`` with runs that report no result line (as the cluster
    backends' listings do): a failed VACUUM-only run is recorded once, degrades the table and is
    retried after the back-off as the next attempt; the retry's success sets lastVacuumTime and
    nothing starts again inside the interval."""
    from dataclasses import replace as dc_replace
    from datetime import timedelta

    import pyarrow as pa

    from tests.support.controller import MemoryLauncher
    from txntable.controller.tick import Operator
    from txntable.engine import Table
    from txntable.launch import Backoff, RunState

    location = tmp_path / "t"
    props = {"delta.deletedFileRetentionDuration": "interval 0 seconds"}
    t = Table.create(str(location), pa.schema([("id", pa.int64())]), [], props)
    t.append(pa.table({"id": [1]}))
    t.overwrite(pa.table({"id": [2]}))  # garbage at once (0-second retention), no small files
    tbl = TxnTable.from_manifest(
        table_manifest(
            "sales",
            location,
            namespace="lake",
            metadata={"uid": "uid-1"},
            compactionPolicyRef={"name": "tidy"},
        )
    )
    pol = CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "tidy",
            namespace="lake",
            minFileSize="1",
            triggers={"smallFiles": 2, "cooldown": "1s"},
            vacuum={"enabled": True, "interval": "6h"},
        )
    )
    # the controller's clock starts ten minutes before the real time, the removes'
    # deletionTimestamps are real: the retry's VACUUM (under a minute later on the controller's
    # clock) started before the file was removed, so the garbage is still there after it
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    clock = [t0]
    launcher = MemoryLauncher(clock)
    operator = Operator(
        config=Config(default_backend="local"),
        launchers=lambda backend: launcher,
        clock=lambda: clock[0],
    )
    events: list[tuple[str, str]] = []

    def tick(at: datetime) -> Any:
        nonlocal tbl
        clock[0] = at
        out = operator.reconcile(tbl, [pol], [])
        tbl = dc_replace(tbl, status=out.status)
        events.extend((e.reason, e.message) for e in out.events)
        return out

    first = tick(t0)
    assert len(launcher.launched) == 1 and launcher.launched[0].startswith("vac-")
    launcher.fail(launcher.launched[0], "exit code 1: vacuum: retention below the table's")
    for s in range(1, 10):
        out = tick(t0 + timedelta(seconds=s))
    assert len(launcher.launched) == 1
    assert [r for r, _ in events].count("RunFailed") == 1
    assert out.status.last_vacuum.outcome == "Failed" and out.status.phase == "Degraded"
    assert out.status.last_vacuum_time is None
    conds = {c.type: c for c in out.status.conditions}
    assert conds["Vacuuming"].reason == "BackingOff" and conds["Ready"].status == "False"
    assert first.status.last_vacuum.outcome == "Running"

    wait = Backoff().delay(1, "uid-1/vacuum")
    retried_at = t0 + timedelta(seconds=wait + 2)
    tick(retried_at)
    assert len(launcher.launched) == 2 and launcher.launched[1].endswith("-r1")
    retry = launcher.launched[1]
    launcher.runs[retry] = dc_replace(
        launcher.runs[retry], state=RunState.SUCCEEDED, finished=retried_at + timedelta(seconds=3)
    )
    for minutes in (1, 60, 5 * 60):
        out = tick(retried_at + timedelta(minutes=minutes))
    assert len(launcher.launched) == 2  # inside the 6h interval, garbage or not
    assert out.status.reclaimable_bytes
    assert out.status.last_vacuum.outcome == "Succeeded" and out.status.phase == "Ready"
    assert out.status.last_vacuum_time == retried_at.replace(microsecond=0)
    assert {c.type: c for c in out.status.conditions}["Vacuuming"].reason == "NotDue"
    tick(retried_at + timedelta(hours=6, minutes=1))
    assert len(launcher.launched) == 3  # the interval is over and the garbage is still there
