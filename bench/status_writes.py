"""Status writes while the operator-wide run limit is full (issue 23.10), in-process.

Each status change of a TxnTable is one PATCH to the API server, so status that changes with
nothing to report is a write storm that grows with the number of tables. Before the fix, a table
with nothing due said ``NotDue`` while a run slot was free and ``ConcurrencyLimit`` while the
limit was full: every table flipped each time another table's run started or ended.

N real tables (a 6-commit log with 12 small files each, copies of one template) are reconciled
by one ``Operator.reconcile`` as ``handlers.driver`` ticks them (the operator counts the other
tables' runs in flight itself), one tick per table per simulated minute, on an in-memory
launcher whose runs end 3 minutes after they start. A compaction policy considers D of the
tables due (small-file threshold 4) and the others not (threshold 100); the operator allows
``LIMIT`` runs at once. A write is counted whenever a table's rendered status differs from the
one before it (what the timer patches). The figure is writes per table-minute; a table with
nothing due should cost none.

``python -m bench.run --only status_writes [--quick]``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.process import PeakRss, peak_cell
from txntable.api.constants import LABEL_TABLE
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine import Table
from txntable.launch import Backend, Launcher, RunRequest, RunState, RunStatus

NAME = "status_writes"
LIMIT = 4
RUN_MINUTES = 3
#: (tables, of them due), minutes simulated
FULL_CASES = ((100, 10), (300, 10))
QUICK_CASES = ((20, 4),)
FULL_MINUTES, QUICK_MINUTES = 30, 6
T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


class _Runs(Launcher):
    """Runs that exist only in memory and end ``RUN_MINUTES`` after they start, listed per
    table by their label (as the real launchers list them)."""

    backend = Backend.LOCAL

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock
        self.runs: dict[str, RunStatus] = {}

    def launch(self, req: RunRequest) -> RunStatus:
        run = RunStatus(
            name=req.name,
            namespace=req.namespace,
            state=RunState.RUNNING,
            created=self.clock[0],
            started=self.clock[0],
            labels=req.labels,
            annotations=req.annotations,
        )
        return self.runs.setdefault(req.name, run)

    def status(self, namespace: str, name: str) -> RunStatus:
        return self.runs[name]

    def delete(self, namespace: str, name: str) -> None:
        self.runs.pop(name, None)

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        for name, run in list(self.runs.items()):
            if run.labels.get(LABEL_TABLE) != table:
                continue
            started = run.started or self.clock[0]
            if not run.state.finished and self.clock[0] - started >= timedelta(minutes=RUN_MINUTES):
                done = {"numFilesRemoved": 0, "numFilesAdded": 0}
                self.runs[name] = replace(
                    run, state=RunState.SUCCEEDED, finished=self.clock[0], result=done
                )
        return [run for run in self.runs.values() if run.labels.get(LABEL_TABLE) == table]


def _policy(name: str, small_files: int) -> CompactionPolicy:
    return CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"triggers": {"smallFiles": small_files, "cooldown": "1s"}},
        }
    )


def _template(root: Path) -> Path:
    path = root / "template"
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    table = Table.create(str(path), schema, partition_by=["part"])
    for i in range(6):
        table.append(pa.table({"id": [i, i + 100], "part": ["a", "b"]}, schema))
    return path


def measure(tables: int, due: int, minutes: int, root: Path) -> dict[str, Any]:
    """Status writes of ``tables`` tables, ``due`` of them due, over ``minutes`` minutes."""
    template = _template(root)
    policies = [_policy("due", 4), _policy("idle", 100)]
    clock = [T0]
    launcher = _Runs(clock)
    operator = Operator(
        config=Config(default_backend="local", max_concurrent_runs=LIMIT),
        launchers=lambda backend: launcher,
        clock=lambda: clock[0],
    )
    resources: list[TxnTable] = []
    for i in range(tables):
        location = root / f"t{i}"
        shutil.copytree(template, location)
        resources.append(
            TxnTable.from_manifest(
                {
                    "apiVersion": "txntable.io/v1alpha1",
                    "kind": "TxnTable",
                    "metadata": {"name": f"t{i}", "namespace": "default", "uid": f"u{i}"},
                    "spec": {
                        "location": str(location),
                        "compactionPolicyRef": {"name": "due" if i < due else "idle"},
                    },
                }
            )
        )
    last: list[Any] = [None] * tables
    writes = {"due": 0, "idle": 0}
    started = time.monotonic()
    for minute in range(minutes):
        clock[0] = T0 + timedelta(minutes=minute)
        for i in range(tables):
            tick = operator.reconcile(resources[i], policies, [])
            rendered = tick.status.to_status()
            if minute and rendered != last[i]:
                writes["due" if i < due else "idle"] += 1
            last[i] = rendered
            resources[i] = replace(resources[i], status=tick.status)
    per = (minutes - 1) or 1
    return {
        "tables": tables,
        "due": due,
        "minutes": minutes,
        "writes_due": writes["due"],
        "writes_idle": writes["idle"],
        "per_table_minute": (writes["due"] + writes["idle"]) / (tables * per),
        "idle_per_table_minute": writes["idle"] / (max(tables - due, 1) * per),
        "seconds": round(time.monotonic() - started, 1),
    }


def run(quick: bool) -> dict[str, Any]:
    cases = QUICK_CASES if quick else FULL_CASES
    minutes = QUICK_MINUTES if quick else FULL_MINUTES
    rows = []
    for tables, due in cases:
        with (
            tempfile.TemporaryDirectory(prefix="txntable-status-writes-") as tmp,
            PeakRss(os.getpid()) as memory,
        ):
            row = measure(tables, due, minutes, Path(tmp))
        rows.append(row | memory.figures())
    return {"limit": LIMIT, "rows": rows}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Run limit {result['limit']}, runs of 3 minutes, one reconcile per table per minute "
        "(in-process, `Operator.reconcile`).",
        "",
        "| tables | due | minutes | status writes (due tables) | (tables with nothing due) "
        "| per table-minute | per idle table-minute | peak RSS, MB (before) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['tables']} | {r['due']} | {r['minutes']} | {r['writes_due']} | "
            f"{r['writes_idle']} | {r['per_table_minute']:.3f} | "
            f"{r['idle_per_table_minute']:.3f} | "
            f"{peak_cell(r)} |"
        )
    return "\n".join(lines)
