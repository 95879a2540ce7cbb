"""The in-process controller of the handler tests: runs in memory, a clock the test moves."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry

from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator, Tick
from txntable.engine import Table
from txntable.launch import Backend, Launcher, RunRequest, RunState, RunStatus
from txntable.launch.errors import RunNotFoundError
from txntable.observability.controller_metrics import ControllerMetrics

T0 = datetime(2026, 11, 25, 10, 0, 7, tzinfo=UTC)


class MemoryLauncher(Launcher):
    """Runs that exist only in this object; the test decides when and how they end."""

    backend = Backend.LOCAL

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock
        self.runs: dict[str, RunStatus] = {}
        self.launched: list[str] = []

    def launch(self, req: RunRequest) -> RunStatus:
        if req.name in self.runs:
            return replace(self.runs[req.name], adopted=True)
        self.launched.append(req.name)
        run = RunStatus(
            name=req.name,
            namespace=req.namespace,
            state=RunState.RUNNING,
            created=self.clock[0],
            started=self.clock[0],
            labels=req.labels,
            annotations=req.annotations,
        )
        self.runs[req.name] = run
        return run

    def fail(self, name: str, message: str) -> None:
        run = self.runs[name]
        self.runs[name] = replace(
            run, state=RunState.FAILED, message=message, finished=self.clock[0]
        )

    def status(self, namespace: str, name: str) -> RunStatus:
        try:
            return self.runs[name]
        except KeyError:
            raise RunNotFoundError(namespace, name) from None

    def delete(self, namespace: str, name: str) -> None:
        self.runs.pop(name, None)

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        return sorted(self.runs.values(), key=lambda r: (r.created or T0, r.name))


def fragmented(path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    table = Table.create(str(path), schema, partition_by=["part"])
    for i in range(6):
        table.append(pa.table({"id": [i, i + 100], "part": ["a", "b"]}))


def resources(location: Path) -> tuple[TxnTable, CompactionPolicy]:
    table = TxnTable.from_manifest(
        table_manifest(
            "events", location, metadata={"uid": "uid-1"}, compactionPolicyRef={"name": "compact"}
        )
    )
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "compact",
            triggers={"smallFiles": 4, "cooldown": "1s"},
            # failedRunsHistoryLimit 0: the failed run object is deleted at once; the count
            # of failures in a row must survive that (it travels in the run names)
            failedRunsHistoryLimit=0,
        )
    )
    return table, policy


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        fragmented(tmp_path / "t")
        self.table, self.policy = resources(tmp_path / "t")
        self.clock = [T0]
        self.launcher = MemoryLauncher(self.clock)
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
        )
        self.events: list[tuple[str, str]] = []
        self.phases: list[str] = []

    def tick(self, at: datetime, *, write_status: bool = True) -> Tick:
        self.clock[0] = at
        tick = self.operator.reconcile(self.table, [self.policy], [])
        self.events += [(e.reason, e.message) for e in tick.events]
        self.phases.append(str(tick.status.phase))
        if write_status:
            self.table = replace(self.table, status=tick.status)
        return tick

    def reasons(self, reason: str) -> list[str]:
        return [m for r, m in self.events if r == reason]


DAY_MS = 86_400_000
LABELS = {"namespace": "default", "table": "events"}


def txntable(location: Path, **spec: Any) -> TxnTable:
    return TxnTable.from_manifest(
        table_manifest(
            "events",
            location,
            metadata={"uid": "uid-1"},
            **{"compactionPolicyRef": {"name": "compact"}, **spec},
        )
    )


def compaction(**spec: Any) -> CompactionPolicy:
    return CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "compact", **{"triggers": {"smallFiles": 4, "cooldown": "1s"}, **spec}
        )
    )


def checkpointing(**spec: Any) -> CheckpointPolicy:
    return CheckpointPolicy.from_manifest(checkpoint_policy_manifest("ckpt", **spec))


class Controller:
    """An Operator on a clock the test moves, with its launcher, metrics and a status that is
    written back after every tick (as the Kopf handler patches it)."""

    def __init__(self, table: TxnTable, at: datetime = T0) -> None:
        self.table = table
        self.clock = [at]
        self.launcher = MemoryLauncher(self.clock)
        self.metrics = ControllerMetrics(CollectorRegistry())
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
            metrics=self.metrics,
        )
        self.events: list[tuple[str, str]] = []

    def tick(
        self,
        at: datetime | None = None,
        compaction: list[CompactionPolicy] | None = None,
        checkpoint: list[CheckpointPolicy] | None = None,
        *,
        write_status: bool = True,
    ) -> Tick:
        if at is not None:
            self.clock[0] = at
        tick = self.operator.reconcile(self.table, compaction or [], checkpoint or [])
        self.events += [(e.reason, e.message) for e in tick.events]
        if write_status:
            self.table = replace(self.table, status=tick.status)
        return tick

    def finish(self, name: str, state: RunState, result: dict[str, Any] | None = None) -> None:
        run = self.launcher.runs[name]
        self.launcher.runs[name] = replace(run, state=state, finished=self.clock[0], result=result)

    def reasons(self, reason: str) -> list[str]:
        return [m for r, m in self.events if r == reason]

    def sample(self, metric: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(metric, {**LABELS, **labels})


def conditions(tick: Tick) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in tick.status.conditions}


def with_garbage(path: Path, now: datetime) -> int:
    """A table with one live file and one removed 30 days before ``now`` (7-day retention):
    nothing to compact, the removed file's bytes reclaimable. Returns those bytes."""
    t = Table.create(str(path), pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2, 3]}))
    t.append(pa.table({"id": [4]}))
    gone = next(iter(t.snapshot().add_actions()))
    txn = t.transaction()
    stamp = int(now.timestamp() * 1000) - 30 * DAY_MS
    txn.add(gone.to_remove(deletion_timestamp=stamp, data_change=True))
    txn.commit("DELETE")
    return gone.size
