"""A run is launched once per plan and cooldown even when the status the tick reads lags behind.

Kopf hands a timer the object as the last watch event showed it, and a status patch shows up
there only when its watch event arrives: under load, several ticks in a row read a status from
before the run was launched. Once the finished run is recorded and its object deleted by a
history limit of 0, such a tick found neither a run object nor a record in the status read, and
the controller launched the same run (same name: the same minute's slot) a second time inside
the policy's 1 h cooldown. Seen in tests/controlplane/test_rbac.py (cluster-wide) under load: a
second Job with the first's name 8 s after the first finished. The same held for a VACUUM-only
run and its interval (``lastVacuumTime`` read from the lagging status).

Each tick here reads the status the table started with (``write_status=False``): no status
patch is ever seen, the worst a lagging watch can do.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.support.controller import T0, MemoryLauncher, fragmented
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Observed, Operator, Tick
from txntable.engine import Table
from txntable.launch import RunState


class Stale:
    """An operator whose every tick reads the table as first seen (the status never caught up)."""

    def __init__(self, location: Path, policy: dict[str, Any], clock: datetime = T0) -> None:
        self.table = TxnTable.from_manifest(
            table_manifest(
                "events",
                location,
                metadata={"uid": "uid-1"},
                compactionPolicyRef={"name": "compact"},
                storage={"secretRef": {"name": "creds"}},
            )
        )
        self.policy = CompactionPolicy.from_manifest(
            compaction_policy_manifest(
                "compact",
                # the history limit of 0 deletes each finished run once it is recorded
                **{"successfulRunsHistoryLimit": 0, "failedRunsHistoryLimit": 0, **policy},
            )
        )
        self.clock = [clock]
        self.launcher = MemoryLauncher(self.clock)
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
        )
        self.started: list[str] = []

    def tick(self, at: datetime) -> Tick:
        self.clock[0] = at
        tick = self.operator.reconcile(self.table, [self.policy], [])  # never the new status
        self.started += [e.message for e in tick.events if e.reason == "RunStarted"]
        return tick

    def succeed(self, name: str, at: datetime) -> None:
        run = self.launcher.runs[name]
        self.launcher.runs[name] = replace(run, state=RunState.SUCCEEDED, finished=at)


def test_a_compaction_is_not_launched_again_in_its_cooldown_when_the_status_lags(
    tmp_path: Path,
) -> None:
    fragmented(tmp_path / "t")
    s = Stale(tmp_path / "t", {"triggers": {"smallFiles": 4, "cooldown": "1h"}})
    s.tick(T0)
    (first,) = s.launcher.launched
    s.tick(T0 + timedelta(seconds=2))
    s.succeed(first, T0 + timedelta(seconds=5))
    recorded = s.tick(T0 + timedelta(seconds=6))
    assert first not in s.launcher.runs  # recorded, then deleted by the history limit
    for sec in (8, 20, 50, 600):
        tick = s.tick(T0 + timedelta(seconds=sec))
    assert s.launcher.launched == [first] and len(s.started) == 1
    for t in (recorded, tick):
        record = t.status.last_compaction
        assert record is not None and record.run_name == first
        assert str(record.outcome) == "Succeeded"
    conds = {c.type: c for c in tick.status.conditions}
    assert conds["Compacting"].reason == "Cooldown"
    s.tick(T0 + timedelta(hours=1, seconds=6))  # the cooldown is over: the next run
    assert len(s.launcher.launched) == 2 and s.launcher.launched[1] != first


def test_a_launched_run_not_listed_yet_is_not_launched_again_when_the_status_lags(
    tmp_path: Path,
) -> None:
    """A listing may lag behind the launch too (an API server's watch cache): the run this
    controller started is still its newest compaction, not launched (or adopted) again."""
    fragmented(tmp_path / "t")
    s = Stale(tmp_path / "t", {"triggers": {"smallFiles": 4, "cooldown": "1h"}})
    s.tick(T0)
    (first,) = s.launcher.launched
    listed = s.launcher.runs.pop(first)  # not in the listings for a while
    tick = s.tick(T0 + timedelta(seconds=2))
    assert s.launcher.launched == [first] and len(s.started) == 1
    record = tick.status.last_compaction
    assert record is not None and record.run_name == first and str(record.outcome) == "Running"
    s.launcher.runs[first] = listed
    s.tick(T0 + timedelta(seconds=4))
    assert s.launcher.launched == [first] and len(s.started) == 1


def test_a_vacuum_is_not_launched_again_in_its_interval_when_the_status_lags(
    tmp_path: Path,
) -> None:
    location = tmp_path / "t"
    props = {"delta.deletedFileRetentionDuration": "interval 0 seconds"}
    t = Table.create(str(location), pa.schema([("id", pa.int64())]), [], props)
    t.append(pa.table({"id": [1]}))
    t.overwrite(pa.table({"id": [2]}))  # garbage at once (0-second retention), no small files
    # the controller's clock starts at the real time: the removes' deletionTimestamps are real
    t0 = datetime.now(UTC).replace(microsecond=0)
    policy = {
        "minFileSize": "1",
        "triggers": {"smallFiles": 2, "cooldown": "1s"},
        "vacuum": {"enabled": True, "interval": "6h"},
    }
    s = Stale(location, policy, clock=t0)
    s.tick(t0)
    (first,) = s.launcher.launched
    assert first.startswith("vac-")
    s.succeed(first, t0 + timedelta(seconds=3))
    s.tick(t0 + timedelta(seconds=4))
    assert first not in s.launcher.runs  # recorded, then deleted by the history limit
    for minutes in (1, 2, 60):
        tick = s.tick(t0 + timedelta(minutes=minutes))
    assert s.launcher.launched == [first] and len(s.started) == 1
    assert tick.status.last_vacuum_time == t0
    assert {c.type: c for c in tick.status.conditions}["Vacuuming"].reason == "NotDue"


def test_a_storage_error_does_not_make_the_controller_forget_its_runs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """An unreachable storage makes the controller open the table again; it must not drop what
    it knows of the table's runs with the table's handle (the next tick still reads a status
    that lags behind)."""
    from txntable.engine.errors import StorageError
    from txntable.engine.read.summary import TableSummary

    fragmented(tmp_path / "t")
    s = Stale(tmp_path / "t", {"triggers": {"smallFiles": 4, "cooldown": "1h"}})
    s.tick(T0)
    (first,) = s.launcher.launched
    s.succeed(first, T0 + timedelta(seconds=5))
    s.tick(T0 + timedelta(seconds=6))
    assert first not in s.launcher.runs
    advance = TableSummary.advance

    def unreachable(self: TableSummary, *args: Any, **kwargs: Any) -> TableSummary:
        raise StorageError("connection reset")

    monkeypatch.setattr(TableSummary, "advance", unreachable)
    blip = s.tick(T0 + timedelta(seconds=8))
    assert {c.type: c for c in blip.status.conditions}["Reachable"].status == "False"
    monkeypatch.setattr(TableSummary, "advance", advance)
    for sec in (10, 30):
        tick = s.tick(T0 + timedelta(seconds=sec))
    assert s.launcher.launched == [first] and len(s.started) == 1
    record = tick.status.last_compaction
    assert record is not None and record.run_name == first and str(record.outcome) == "Succeeded"


def test_a_changed_secret_does_not_make_the_controller_forget_its_runs(tmp_path: Path) -> None:
    """A rotated storage Secret makes the controller open the table again with it, and only
    that (the next tick still reads a status that lags behind)."""
    from txntable.handlers.secret_cache import SecretCache, SecretData
    from txntable.handlers.secret_source import SecretCredentials

    fragmented(tmp_path / "t")
    s = Stale(tmp_path / "t", {"triggers": {"smallFiles": 4, "cooldown": "1h"}})
    s.tick(T0)
    (first,) = s.launcher.launched
    s.succeed(first, T0 + timedelta(seconds=5))
    s.tick(T0 + timedelta(seconds=6))
    assert first not in s.launcher.runs
    versions = iter(["1", "2"])
    cache = SecretCache(lambda ns, name: SecretData({}, next(versions)), max_age=0)
    credentials = SecretCredentials(cache, s.operator.memories, s.operator.reopen)
    key = s.table.metadata.key
    observed = s.operator.memories.of(key, Observed)
    handle = observed.table
    assert handle is not None
    credentials.options(key, s.table)
    credentials.options(key, s.table)  # rotated: version 2
    assert observed.table is None  # opened again at the next tick, with the new Secret
    tick = s.tick(T0 + timedelta(seconds=10))
    assert observed.table is not None and observed.table is not handle
    assert s.launcher.launched == [first] and len(s.started) == 1
    record = tick.status.last_compaction
    assert record is not None and record.run_name == first and str(record.outcome) == "Succeeded"
