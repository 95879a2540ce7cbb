"""Backing a table off when our compaction runs keep losing to other writers (issue 16.2).

The rule (``reconcile.conflicts``) on figures, then the controller through
``Operator.reconcile`` tick by tick with the in-memory launcher of ``tests.support.controller``:
runs that report dropped bins or retried commits in their result line hold the next compaction
back for a delay that doubles per conflicting run in a row up to the policy's maximum,
status.conflicts and the Compacting condition say so with the figures, the metric gives the
seconds left, the event comes once.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.support.controller import MemoryLauncher, fragmented
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.table import RunConflicts
from txntable.api.types import CompactionPolicy, ConflictBackOff, TxnTable, TxnTableStatus
from txntable.config import Config
from txntable.controller.tick import Operator, Tick
from txntable.launch import RunState
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.reconcile.conflicts import KEPT_RUNS, conflict_hold, figures_of, remember

T0 = datetime(2026, 11, 25, 10, 0, 7, tzinfo=UTC)
MIN = 60


def result(planned: int, dropped: int, attempts: int = 1, retries: int = 0) -> dict[str, Any]:
    return {
        "binsPlanned": planned,
        "binsCommitted": planned - dropped,
        "binsSkipped": dropped,
        "numFilesRemoved": 2 * (planned - dropped),
        "numFilesAdded": planned - dropped,
        "engineMetrics": {"attempts": attempts, "retries": retries, "commits": {}},
    }


def run(name: str, planned: int, dropped: int, attempts: int = 1, retries: int = 0) -> Any:
    return RunConflicts(
        run_name=name,
        bins_planned=planned,
        bins_dropped=dropped,
        commit_attempts=attempts,
        commit_retries=retries,
    )


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (None, None),
        ({"dryRun": True, **result(4, 4)}, None),
        ({"vacuumOnly": True}, None),
        (result(0, 0, attempts=0), None),
        (result(4, 3, attempts=2, retries=1), run("r", 4, 3, 2, 1)),
        ({**result(2, 0), "binsSkipped": 9}, run("r", 2, 2)),  # never more than planned
        ({"binsPlanned": 3, "binsSkipped": "x"}, run("r", 3, 0, 0, 0)),
    ],
    ids=["no-result", "dry-run", "vacuum-only", "nothing-planned", "figures", "capped", "bad"],
)
def test_figures_of_a_result_line(doc: dict[str, Any] | None, expected: Any) -> None:
    assert figures_of("r", doc) == expected


SETTINGS = ConflictBackOff(conflict_percent=50, runs=3, initial_delay=10 * MIN, max_delay=40 * MIN)


@pytest.mark.parametrize(
    ("runs", "delay"),
    [
        ([run("a", 4, 1)], None),  # 25% < 50%
        ([run("a", 4, 2)], 10),  # at the threshold: the first delay
        ([run("b", 4, 3), run("a", 4, 4)], 20),  # two in a row: doubled
        ([run(str(i), 4, 4) for i in range(3)], 40),
        ([run(str(i), 4, 4) for i in range(6)], 40),  # bounded by maxDelay
        ([run("c", 4, 0), run("b", 4, 4), run("a", 4, 4)], 10),  # a clean run ends the streak
        ([run("d", 4, 0), run("c", 4, 0), run("b", 4, 4), run("a", 4, 4)], None),  # window 3
        ([run("a", 1, 0, attempts=4, retries=3)], 10),  # commit retries count as conflicts
    ],
    ids=["under", "at", "two", "three", "bounded", "streak-ends", "window", "retries"],
)
def test_conflict_hold(runs: list[RunConflicts], delay: int | None) -> None:
    hold = conflict_hold(runs, SETTINGS, T0)
    if delay is None:
        assert hold is None
    else:
        assert hold is not None and hold.until == T0 + timedelta(minutes=delay)


def test_no_back_off_when_off_or_without_runs() -> None:
    hot = [run("a", 4, 4)]
    assert conflict_hold(hot, ConflictBackOff(), T0) is None  # conflictPercent unset
    assert conflict_hold([], SETTINGS, T0) is None
    assert conflict_hold(hot, SETTINGS, None) is None


def test_remember_keeps_each_run_once_newest_first() -> None:
    known = tuple(run(f"old{i}", 1, 0) for i in range(KEPT_RUNS))
    merged = remember(known, [run("new", 2, 1), run("old0", 1, 0)])
    assert [r.run_name for r in merged[:3]] == ["new", "old0", "old1"]
    assert len(merged) == KEPT_RUNS


class Controller:
    def __init__(self, tmp_path: Path) -> None:
        fragmented(tmp_path / "t")
        self.table = TxnTable.from_manifest(
            table_manifest(
                "events",
                tmp_path / "t",
                metadata={"uid": "uid-1"},
                compactionPolicyRef={"name": "compact"},
            )
        )
        self.policy = CompactionPolicy.from_manifest(
            compaction_policy_manifest(
                "compact",
                triggers={"smallFiles": 4, "cooldown": "1s"},
                avoidRecentWrites={
                    "backOff": {
                        "conflictPercent": 50,
                        "runs": 3,
                        "initialDelay": "10m",
                        "maxDelay": "40m",
                    }
                },
            )
        )
        self.clock = [T0]
        self.launcher = MemoryLauncher(self.clock)
        self.metrics = ControllerMetrics(CollectorRegistry())
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
            metrics=self.metrics,
        )
        self.events: list[tuple[str, str]] = []

    def tick(self, at: datetime) -> Tick:
        self.clock[0] = at
        tick = self.operator.reconcile(self.table, [self.policy], [])
        self.events += [(e.reason, e.message) for e in tick.events]
        self.table = replace(self.table, status=tick.status)
        return tick

    def finish(self, at: datetime, doc: dict[str, Any]) -> None:
        name = self.launcher.launched[-1]
        self.launcher.runs[name] = replace(
            self.launcher.runs[name], state=RunState.SUCCEEDED, finished=at, result=doc
        )

    def compacting(self) -> tuple[str, str]:
        cond = {c.type: c for c in self.table.status.conditions}["Compacting"]
        return cond.reason, cond.message

    def backoff_seconds(self) -> float | None:
        return self.metrics.registry.get_sample_value(
            "txntable_table_conflict_backoff_seconds", {"namespace": "default", "table": "events"}
        )


def test_runs_that_keep_conflicting_back_the_table_off_longer_each_time(tmp_path: Path) -> None:
    c = Controller(tmp_path)
    c.tick(T0)
    assert len(c.launcher.launched) == 1
    ended = T0 + timedelta(minutes=1)
    delays = []
    for n in range(1, 5):  # every run drops 3 bins of 4
        c.finish(ended, result(4, 3))
        tick = c.tick(ended + timedelta(seconds=1))
        conflicts = tick.status.conflicts
        assert conflicts is not None and conflicts.percent == 75
        assert conflicts.runs[0].run_name == c.launcher.launched[-1]
        until = conflicts.back_off_until
        assert until is not None
        delays.append(int((until - ended).total_seconds()) // MIN)
        reason, message = c.compacting()
        assert reason == "ConflictBackOff"
        k = min(n, 3)  # runs in the window
        assert f"{3 * k} of {4 * k} bins dropped" in message and "75%" in message
        assert c.backoff_seconds() == (until - c.clock[0]).total_seconds()
        c.tick(until - timedelta(seconds=1))
        assert len(c.launcher.launched) == n  # still held
        c.tick(until + timedelta(seconds=1))
        assert len(c.launcher.launched) == n + 1  # the back-off is over: the next run starts
        ended = until + timedelta(minutes=2)
    assert delays == [10, 20, 40, 40]
    assert [r for r, _ in c.events].count("ConflictBackOff") == 4  # once per back-off

    # a clean run: the window (3 runs: 0, 3, 3 of 4) is still at 50%, the streak is over
    c.finish(ended, result(4, 0))
    tick = c.tick(ended + timedelta(seconds=1))
    assert tick.status.conflicts is not None and tick.status.conflicts.percent == 50
    assert c.compacting()[0] == "ConflictBackOff"
    c.tick(ended + timedelta(minutes=10, seconds=1))
    assert len(c.launcher.launched) == 6
    c.finish(ended + timedelta(minutes=11), result(4, 0))
    tick = c.tick(ended + timedelta(minutes=11, seconds=1))  # 3 of 12 bins: under 50%
    assert tick.status.conflicts is not None and tick.status.conflicts.back_off_until is None
    assert c.compacting()[0] != "ConflictBackOff"
    assert c.backoff_seconds() == 0


def test_the_figures_outlive_the_run_objects_and_a_restart(tmp_path: Path) -> None:
    c = Controller(tmp_path)
    c.tick(T0)
    ended = T0 + timedelta(minutes=1)
    c.finish(ended, result(2, 2))
    c.tick(ended + timedelta(seconds=1))
    c.launcher.runs.clear()  # history limits deleted the run objects
    c.operator = Operator(  # a new controller: only the status remembers
        config=Config(default_backend="local"),
        launchers=lambda backend: c.launcher,
        clock=lambda: c.clock[0],
    )
    tick = c.tick(ended + timedelta(minutes=5))
    assert tick.status.conflicts is not None and tick.status.conflicts.runs[0].bins_dropped == 2
    assert TxnTableStatus.from_dict(tick.status.to_status()) == tick.status
    assert c.compacting()[0] == "ConflictBackOff"
    assert c.launcher.launched[-1:] == c.launcher.launched[:1]  # nothing new launched


def test_no_back_off_is_counted_down_while_a_run_is_in_flight(tmp_path: Path) -> None:
    """Issue 23.11: the back-off holds the next run after a finished one. Before, a run started
    after the back-off made the gauge (and status.conflicts.backOffUntil) count down a new
    back-off from that run's start while it ran."""
    c = Controller(tmp_path)
    c.tick(T0)
    ended = T0 + timedelta(minutes=1)
    c.finish(ended, result(4, 4))
    tick = c.tick(ended + timedelta(seconds=1))
    until = tick.status.conflicts.back_off_until if tick.status.conflicts else None
    assert until is not None and c.backoff_seconds() > 0
    c.tick(until + timedelta(seconds=1))
    assert len(c.launcher.launched) == 2  # the next run is in flight
    for minutes in (1, 5, 9):
        tick = c.tick(until + timedelta(minutes=minutes))
        assert c.backoff_seconds() == 0
        assert tick.status.conflicts is not None and tick.status.conflicts.back_off_until is None
        assert c.compacting()[0] == "RunStarted"
