"""A table with garbage and nothing to compact is vacuumed by the controller (ADR 0006, issue 11.1).

``Operator.reconcile`` ticks against a real table with the local launcher, which runs the real
job (``python -m txntable.jobs.vacuum``) as a subprocess. The table's files are all large enough
(``minFileSize: 1``), so compaction never starts; overwrites leave removed files that are older
than the table's retention (``delta.deletedFileRetentionDuration`` of 1 second) a moment later.
The controller must start one VACUUM-only run, record it (``lastVacuum``, ``lastVacuumTime``,
``Vacuuming`` condition, Events), leave the rows deltalake reads unchanged, then wait for
``spec.vacuum.interval`` before the next one even though garbage is still reclaimable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.oracle_read import read
from tests.support.vacuum_policy import resources
from txntable.api.conditions import Event
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator, Tick
from txntable.engine import Table
from txntable.launch import LocalLauncher

pytestmark = pytest.mark.integration

RETENTION = {"delta.deletedFileRetentionDuration": "interval 1 seconds"}


def data_files(location: Path) -> set[str]:
    return {p.name for p in location.glob("*.parquet")}


def live_files(location: Path) -> set[str]:
    paths = Table.open(str(location)).snapshot().files().column("path").to_pylist()
    return {Path(p).name for p in paths}


def overwrite(location: Path, first: int) -> None:
    Table.open(str(location)).overwrite(pa.table({"id": list(range(first, first + 50))}))


def wait_past_retention() -> None:
    time.sleep(1.5)  # the removes become older than the table's 1-second retention


class Controller:
    """The operator ticking one table, with the status written back as Kopf would."""

    def __init__(self, tmp_path: Path, table: TxnTable, policy: CompactionPolicy) -> None:
        self.table, self.policy = table, policy
        self.offset = timedelta(0)  # moves the controller's clock (the jobs use the real one)
        launcher = LocalLauncher(tmp_path / "runs", grace_seconds=5)
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: launcher,  # the policy's backend is Local
            clock=lambda: datetime.now(UTC) + self.offset,
        )
        self.events: list[Event] = []
        self.launched: list[str] = []

    def tick(self) -> Tick:
        tick = self.operator.reconcile(self.table, [self.policy], [])
        self.table = replace(self.table, status=tick.status)
        self.events += tick.events
        self.launched += tick.launched
        return tick

    def until(self, done: Callable[[Tick], bool], timeout: float = 120.0) -> Tick:
        """Tick until ``done`` holds (a deadline against hangs, not a timing assertion)."""
        deadline = time.monotonic() + timeout
        while True:
            tick = self.tick()
            if done(tick) or time.monotonic() > deadline:
                return tick
            time.sleep(0.3)

    def condition(self, tick: Tick, type_: str) -> Any:
        return {c.type: c for c in tick.status.conditions}[type_]

    def reasons(self, reason: str) -> list[str]:
        return [e.message for e in self.events if e.reason == reason]


def finished(tick: Tick) -> bool:
    record = tick.status.last_vacuum
    return record is not None and record.outcome not in (None, "Running")


def test_garbage_without_small_files_is_vacuumed_once_per_interval(tmp_path: Path) -> None:
    location = tmp_path / "events"
    table = Table.create(str(location), pa.schema([("id", pa.int64())]), [], RETENTION)
    table.append(pa.table({"id": list(range(50))}))
    overwrite(location, 100)
    overwrite(location, 200)
    wait_past_retention()
    live = live_files(location)
    garbage = data_files(location) - live
    assert len(live) == 1 and len(garbage) == 2
    before = read(location)
    assert before["rows"] == 50

    ctl = Controller(tmp_path, *resources(location))
    first = ctl.tick()
    assert first.status.reclaimable_bytes and first.status.reclaimable_bytes > 0
    assert first.status.small_files == 0
    assert len(ctl.launched) == 1 and ctl.launched[0].startswith("vac-"), ctl.events
    assert ctl.condition(first, "Compacting").reason == "NothingToDo"
    assert ctl.condition(first, "Vacuuming").status == "True"
    started = ctl.reasons("RunStarted")
    assert len(started) == 1 and "bytes reclaimable" in started[0]

    tick = ctl.until(finished)
    record = tick.status.last_vacuum
    assert record is not None and record.outcome == "Succeeded", (record, ctl.events)
    assert record.run_name == ctl.launched[0]
    assert "VACUUM deleted 2 files" in (record.message or "")
    assert tick.status.last_vacuum_time is not None
    assert data_files(location) == live  # the garbage is gone, the live file stays
    after = read(location)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    succeeded = ctl.reasons("RunSucceeded")
    assert len(succeeded) == 1 and f"vacuum run {record.run_name}" in succeeded[0]

    # More garbage: reclaimable again, but inside the interval nothing starts.
    overwrite(location, 300)
    wait_past_retention()
    for _ in range(3):
        tick = ctl.tick()
    assert tick.status.reclaimable_bytes and tick.status.reclaimable_bytes > 0
    assert ctl.launched == [record.run_name]
    vacuuming = ctl.condition(tick, "Vacuuming")
    assert (vacuuming.status, vacuuming.reason) == ("False", "NotDue"), vacuuming.message
    assert len(data_files(location) - live_files(location)) == 1

    # Once the interval has passed, the next VACUUM-only run takes it.
    ctl.offset = timedelta(hours=24, minutes=1)
    ctl.tick()
    assert len(ctl.launched) == 2 and ctl.launched[1] != record.run_name
    tick = ctl.until(
        lambda t: finished(t) and getattr(t.status.last_vacuum, "run_name", "") == ctl.launched[1]
    )
    assert tick.status.last_vacuum is not None and tick.status.last_vacuum.outcome == "Succeeded"
    assert data_files(location) == live_files(location)
    assert read(location)["rows"] == 50
    later = tick.status.last_vacuum_time
    assert later is not None and record.completion_time is not None
    assert later >= record.completion_time
