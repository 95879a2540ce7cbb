"""The Controller of the status.plan tests: a real fragmented table, a moved clock, approvals."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.support.controller import T0, MemoryLauncher
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.constants import ANNOTATION_APPROVE_PLAN
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator, Tick
from txntable.engine import Table

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def _policy(**spec: Any) -> CompactionPolicy:
    return CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "compact",
            metadata={"generation": 1},
            **{"triggers": {"smallFiles": 4, "cooldown": "1s"}, **spec},
        )
    )


class Controller:
    def __init__(self, tmp_path: Path, **spec: Any) -> None:
        self.data = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["part"])
        for i in range(6):
            self.append(i)
        self.table = TxnTable.from_manifest(
            table_manifest(
                "events",
                tmp_path / "t",
                metadata={"uid": "uid-1"},
                compactionPolicyRef={"name": "compact"},
            )
        )
        self.policy = _policy(**spec)
        self.clock = [T0]
        self.launcher = MemoryLauncher(self.clock)
        self.operator = Operator(
            config=Config(default_backend="local"),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
        )
        self.events: list[tuple[str, str]] = []

    def append(self, i: int) -> None:
        self.data.append(pa.table({"id": [i, i + 100], "part": ["a", "b"]}, SCHEMA))

    def tick(self, seconds: float) -> Tick:
        self.clock[0] = T0 + timedelta(seconds=seconds)
        tick = self.operator.reconcile(self.table, [self.policy], [])
        self.events += [(e.reason, e.message) for e in tick.events]
        self.table = replace(self.table, status=tick.status)
        return tick

    def annotate(self, plan_id: str) -> None:
        meta = self.table.metadata
        notes = {**meta.annotations, ANNOTATION_APPROVE_PLAN: plan_id}
        self.table = replace(self.table, metadata=replace(meta, annotations=notes))

    def compacting(self) -> tuple[str, str]:
        cond = {c.type: c for c in self.table.status.conditions}["Compacting"]
        return cond.reason, cond.message
