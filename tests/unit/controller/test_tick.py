"""``Operator.reconcile``, one tick of one table, concern by concern: what observation failures
write into status, when a compaction or VACUUM run is launched, how a finished run becomes a
record, an Event and metrics (once), when an inline or Spark checkpoint is taken, and what a
missing policy does.

The tables are real (written by the engine, read back by the operator); the launcher is the
in-memory ``Launcher`` of tests.support.controller, so the test decides when and how a run ends;
the metrics are a real ``ControllerMetrics`` on its own registry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.controller import (
    T0,
    Controller,
    checkpointing,
    compaction,
    conditions,
    fragmented,
    txntable,
    with_garbage,
)
from txntable.api.conditions import Reason
from txntable.engine import CommitOptions, Table
from txntable.launch import RunState
from txntable.launch.run import LABEL_KIND


# -- observation failures -------------------------------------------------------------------
def corrupt(path: Path) -> None:
    fragmented(path)
    (path / "_delta_log" / f"{3:020d}.json").write_text("{not json\n")


def future_protocol(path: Path) -> None:
    fragmented(path)
    protocol = '{"protocol": {"minReaderVersion": 4, "minWriterVersion": 7}}\n'
    (path / "_delta_log" / f"{7:020d}.json").write_text(protocol)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(lambda path: None, Reason.STORAGE_UNREACHABLE, id="no-directory"),
        pytest.param(lambda path: path.mkdir(), Reason.TABLE_NOT_FOUND, id="no-delta-log"),
        pytest.param(corrupt, Reason.CORRUPT_LOG, id="corrupt-log"),
        pytest.param(future_protocol, Reason.UNSUPPORTED_PROTOCOL, id="reader-version-4"),
    ],
)
def test_a_table_that_cannot_be_observed_is_unreachable_and_left_alone(
    tmp_path: Path, make: Any, reason: Reason
) -> None:
    make(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    tick = c.tick(compaction=[compaction()])
    assert str(tick.status.phase) == "Unreachable"
    conds = conditions(tick)
    assert conds["Reachable"] == ("False", reason)
    assert conds["Ready"] == ("False", reason)
    assert tick.status.version is None
    assert c.launcher.launched == [] and tick.launched == ()


def test_a_table_that_comes_back_is_observed_again(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    c = Controller(txntable(tmp_path / "t"))
    tick = c.tick(compaction=[compaction()])
    assert conditions(tick)["Reachable"] == ("False", Reason.TABLE_NOT_FOUND)
    fragmented(tmp_path / "t")
    tick = c.tick(T0 + timedelta(seconds=30), compaction=[compaction()])
    assert conditions(tick)["Reachable"] == ("True", Reason.AS_EXPECTED)
    assert tick.status.version == 6 and tick.status.files == 12
    assert str(tick.status.phase) == "Compacting" and len(c.launcher.launched) == 1


def test_a_missing_table_with_a_create_spec_is_created(tmp_path: Path) -> None:
    create = {"columns": [{"name": "id", "type": "long"}, {"name": "part", "type": "string"}]}
    (tmp_path / "t").mkdir()  # local storage: the directory must exist
    c = Controller(txntable(tmp_path / "t", create={**create, "partitionColumns": ["part"]}))
    tick = c.tick(compaction=[compaction()])
    assert conditions(tick)["Reachable"][0] == "True"
    assert tick.status.version == 0 and tick.status.files == 0
    made = Table.open(str(tmp_path / "t")).snapshot()
    assert made.metadata.partition_columns == ["part"]
    assert c.launcher.launched == []


def test_a_create_spec_never_creates_a_table_where_the_directory_is_missing(
    tmp_path: Path,
) -> None:
    """A missing local directory may be a volume that is not mounted: creating the table there
    would write it into the container's own filesystem, so it stays unreachable instead."""
    create = {"columns": [{"name": "id", "type": "long"}]}
    c = Controller(txntable(tmp_path / "t", create=create))
    tick = c.tick(compaction=[compaction()])
    assert conditions(tick)["Reachable"] == ("False", Reason.STORAGE_UNREACHABLE)
    assert not (tmp_path / "t").exists()


# -- policies --------------------------------------------------------------------------------
def test_a_missing_policy_is_reported_and_nothing_is_launched(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")  # 12 small files: the missing policy would compact it
    c = Controller(txntable(tmp_path / "t"))
    tick = c.tick(compaction=[])
    conds = conditions(tick)
    assert conds["PolicyResolved"] == ("False", Reason.POLICY_NOT_FOUND)
    assert conds["Ready"] == ("False", Reason.POLICY_NOT_FOUND)
    assert str(tick.status.phase) == "Degraded"
    assert tick.status.compaction_policy is None
    assert tick.status.version == 6  # still observed
    assert c.launcher.launched == []
    # the policy appears: it resolves and compacts
    tick = c.tick(T0 + timedelta(seconds=30), compaction=[compaction()])
    assert conditions(tick)["PolicyResolved"][0] == "True"
    assert tick.status.compaction_policy == "compact" and len(c.launcher.launched) == 1


# -- compaction ------------------------------------------------------------------------------
def test_a_due_compaction_is_launched_once_and_recorded_as_running(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    tick = c.tick(compaction=[compaction()])
    (name,) = c.launcher.launched
    assert tick.launched == (name,) and tick.active_runs == 1
    assert c.launcher.runs[name].labels[LABEL_KIND] == "optimize"
    record = tick.status.last_compaction
    assert record is not None and record.run_name == name
    assert str(record.outcome) == "Running" and record.version == 6
    assert str(tick.status.phase) == "Compacting"
    assert conditions(tick)["Compacting"][0] == "True"
    (started,) = c.reasons("RunStarted")
    assert name in started
    # while it runs, later ticks launch nothing more
    for s in (10, 20, 30):
        tick = c.tick(T0 + timedelta(seconds=s), compaction=[compaction()])
    assert c.launcher.launched == [name] and len(c.reasons("RunStarted")) == 1
    assert str(tick.status.phase) == "Compacting"


def test_a_compaction_that_is_not_due_is_not_launched(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    tick = c.tick(compaction=[compaction(triggers={"smallFiles": 100})])
    assert c.launcher.launched == [] and tick.status.last_compaction is None
    assert conditions(tick)["Compacting"] == ("False", Reason.NOT_DUE)
    assert str(tick.status.phase) != "Compacting"


def test_a_finished_run_is_recorded_counted_and_announced_once(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.tick(compaction=[compaction()])
    (name,) = c.launcher.launched
    # the run commits (tagged with its run id, as the job does) and ends 40 s later
    committed = Table.open(str(tmp_path / "t")).append(
        pa.table({"id": [1], "part": ["a"]}), options=CommitOptions(run_id=name)
    )
    c.clock[0] = T0 + timedelta(seconds=40, microseconds=500)
    result = {
        "version": committed.version,
        "numFilesRemoved": 4,
        "numFilesAdded": 1,
        "numBytesRemoved": 4000,
        "numBytesAdded": 3000,
    }
    c.finish(name, RunState.SUCCEEDED, result)
    quiet = [compaction(triggers={"smallFiles": 100})]
    # the status patch of the tick that records the run may not be seen by the next tick
    tick = c.tick(T0 + timedelta(seconds=45), compaction=quiet, write_status=False)
    assert tick.status.last_compaction == c.tick(compaction=quiet).status.last_compaction
    record = tick.status.last_compaction
    assert record is not None and record.run_name == name
    assert str(record.outcome) == "Succeeded" and record.version == committed.version
    assert record.completion_time == T0 + timedelta(seconds=40)
    assert "commit confirmed in the table log" in (record.message or "")
    (said,) = c.reasons("RunSucceeded")
    assert name in said
    runs = "txntable_maintenance_runs_total"
    assert c.sample(runs, kind="optimize", outcome="succeeded") == 1
    assert c.sample(runs, kind="optimize", outcome="failed") == 0
    assert c.sample("txntable_maintenance_files_removed_total", kind="optimize") == 4
    assert c.sample("txntable_maintenance_bytes_added_total", kind="optimize") == 3000
    assert c.sample("txntable_maintenance_run_duration_seconds_count", kind="optimize") == 1
    # later ticks (the run object still listed) neither record nor count it again
    for s in (50, 60):
        c.tick(T0 + timedelta(seconds=s), compaction=quiet)
    assert len(c.reasons("RunSucceeded")) == 1
    assert c.sample(runs, kind="optimize", outcome="succeeded") == 1
    assert c.launcher.launched == [name]  # the next compaction waits for its trigger


def test_a_run_without_its_commit_in_the_log_says_so(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.tick(compaction=[compaction()])
    (name,) = c.launcher.launched
    c.finish(name, RunState.SUCCEEDED, {"numFilesRemoved": 4, "numFilesAdded": 1})
    record = c.tick(T0 + timedelta(seconds=5), compaction=[compaction()]).status.last_compaction
    assert record is not None and "no commit of this run found" in (record.message or "")


def test_a_failed_run_is_a_failure_in_status_and_metrics(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.tick(compaction=[compaction()])
    (name,) = c.launcher.launched
    c.launcher.fail(name, "exit code 137: killed")
    tick = c.tick(T0 + timedelta(seconds=5), compaction=[compaction()])
    record = tick.status.last_compaction
    assert record is not None and str(record.outcome) == "Failed"
    assert "killed" in (record.message or "")
    assert conditions(tick)["Ready"] == ("False", Reason.RUN_FAILED)
    (said,) = c.reasons("RunFailed")
    assert "killed" in said
    assert c.sample("txntable_maintenance_runs_total", kind="optimize", outcome="failed") == 1
    assert c.sample("txntable_maintenance_consecutive_failures", kind="optimize") == 1


# -- checkpoints -----------------------------------------------------------------------------
def test_a_due_inline_checkpoint_is_written_and_recorded(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")  # versions 0..6, no checkpoint
    table = txntable(tmp_path / "t", checkpointPolicyRef={"name": "ckpt"})
    policy = checkpointing(commitInterval=5, mode="Inline")
    c = Controller(table)
    tick = c.tick(compaction=[compaction(triggers={"smallFiles": 100})], checkpoint=[policy])
    log = tmp_path / "t" / "_delta_log"
    assert (log / f"{6:020d}.checkpoint.parquet").exists()
    record = tick.status.last_checkpoint
    assert record is not None and str(record.outcome) == "Succeeded" and record.version == 6
    assert tick.launched == (record.run_name,) and record.run_name == "inline-checkpoint-6"
    assert c.launcher.launched == []  # inline: no run object
    assert len(c.reasons("RunSucceeded")) == 1
    assert c.sample("txntable_maintenance_runs_total", kind="checkpoint", outcome="succeeded") == 1
    # the next tick sees the checkpoint: nothing due
    tick = c.tick(
        T0 + timedelta(seconds=30),
        compaction=[compaction(triggers={"smallFiles": 100})],
        checkpoint=[policy],
    )
    assert tick.status.commits_since_checkpoint == 0 and tick.status.last_checkpoint_version == 6
    assert conditions(tick)["Checkpointing"] == ("False", Reason.NOT_DUE)
    assert len(c.reasons("RunSucceeded")) == 1


def test_a_checkpoint_that_is_not_due_is_not_written(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    table = txntable(tmp_path / "t", checkpointPolicyRef={"name": "ckpt"})
    c = Controller(table)
    tick = c.tick(
        compaction=[compaction(triggers={"smallFiles": 100})],
        checkpoint=[checkpointing(commitInterval=10, mode="Inline")],
    )
    assert not list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert tick.status.last_checkpoint is None
    assert conditions(tick)["Checkpointing"] == ("False", Reason.NOT_DUE)


def test_a_spark_checkpoint_is_launched_as_a_run(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    table = txntable(tmp_path / "t", checkpointPolicyRef={"name": "ckpt"})
    c = Controller(table)
    tick = c.tick(
        compaction=[compaction(triggers={"smallFiles": 100})],
        checkpoint=[checkpointing(commitInterval=5, mode="Spark")],
    )
    (name,) = c.launcher.launched
    assert c.launcher.runs[name].labels[LABEL_KIND] == "checkpoint"
    record = tick.status.last_checkpoint
    assert record is not None and record.run_name == name and str(record.outcome) == "Running"
    assert not list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert str(tick.status.phase) == "Checkpointing"


# -- VACUUM ----------------------------------------------------------------------------------
def test_a_due_vacuum_is_launched_and_its_end_recorded(tmp_path: Path) -> None:
    # reclaimable bytes are judged on the real clock: the operator's clock is now, too
    now = datetime.now(UTC).replace(microsecond=0)
    garbage = with_garbage(tmp_path / "t", now)
    policy = compaction(triggers={"smallFiles": 100}, vacuum={"enabled": True})
    c = Controller(txntable(tmp_path / "t"), at=now)
    tick = c.tick(compaction=[policy])
    assert tick.status.reclaimable_bytes == garbage
    (name,) = c.launcher.launched
    assert c.launcher.runs[name].labels[LABEL_KIND] == "vacuum"
    record = tick.status.last_vacuum
    assert record is not None and record.run_name == name and str(record.outcome) == "Running"
    assert tick.status.last_compaction is None  # a VACUUM-only run, no compaction
    assert conditions(tick)["Vacuuming"][0] == "True"
    assert any(name in m for m in c.reasons("RunStarted"))

    c.clock[0] = now + timedelta(seconds=20)
    vacuum = {"numFiles": 1, "numDeleted": 1, "bytes": garbage}
    result = {"vacuumOnly": True, "numFilesRemoved": 0, "numFilesAdded": 0, "vacuum": vacuum}
    c.finish(name, RunState.SUCCEEDED, result)
    tick = c.tick(now + timedelta(seconds=30), compaction=[policy])
    record = tick.status.last_vacuum
    assert record is not None and str(record.outcome) == "Succeeded"
    assert f"VACUUM deleted 1 files ({garbage} bytes)" in (record.message or "")
    assert tick.status.last_vacuum_time == now  # when the VACUUM began
    assert tick.status.reclaimable_bytes == 0  # what it deleted is out of the figure
    assert c.sample("txntable_maintenance_runs_total", kind="vacuum", outcome="succeeded") == 1
    # inside the interval (24 h by default): no second VACUUM
    tick = c.tick(now + timedelta(hours=1), compaction=[policy])
    assert c.launcher.launched == [name]
    assert conditions(tick)["Vacuuming"][0] == "False"


def test_files_a_vacuum_kept_for_iceberg_readers_are_in_the_status(tmp_path: Path) -> None:
    """A UniForm table's VACUUM keeps what the current Iceberg metadata reads (ADR 0010): the
    run's record says how many files, which metadata, and when they go."""
    now = datetime.now(UTC).replace(microsecond=0)
    garbage = with_garbage(tmp_path / "t", now)
    policy = compaction(triggers={"smallFiles": 100}, vacuum={"enabled": True})
    c = Controller(txntable(tmp_path / "t"), at=now)
    c.tick(compaction=[policy])
    (name,) = c.launcher.launched
    iceberg = {
        "metadata": ["metadata/00004-9f.metadata.json"],
        "snapshotIds": [7],
        "deltaVersions": [12],
        "numHeld": 30,
        "heldBytes": 4096,
        "held": ["p=1/a.parquet"],
    }
    vacuum = {"numFiles": 1, "numDeleted": 1, "bytes": garbage, "iceberg": iceberg}
    result = {"vacuumOnly": True, "numFilesRemoved": 0, "numFilesAdded": 0, "vacuum": vacuum}
    c.finish(name, RunState.SUCCEEDED, result)
    tick = c.tick(now + timedelta(seconds=30), compaction=[policy])
    record = tick.status.last_vacuum
    assert record is not None and str(record.outcome) == "Succeeded"
    said = (
        "VACUUM kept 30 files (4096 bytes) that the current Iceberg metadata still reads "
        "(metadata/00004-9f.metadata.json, converted from Delta version 12): Delta regenerates "
        "it at the table's next Delta commit"
    )
    assert said in (record.message or "")
    assert any(said in m for m in c.reasons("RunSucceeded"))


def test_vacuum_off_launches_nothing_for_garbage(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    garbage = with_garbage(tmp_path / "t", now)
    c = Controller(txntable(tmp_path / "t"), at=now)
    tick = c.tick(compaction=[compaction(triggers={"smallFiles": 100})])
    assert tick.status.reclaimable_bytes == garbage
    assert c.launcher.launched == [] and tick.status.last_vacuum is None
    assert conditions(tick)["Vacuuming"] == ("False", Reason.DISABLED)
