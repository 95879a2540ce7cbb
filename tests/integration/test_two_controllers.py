"""High availability, the launcher's half: two controllers deciding at the same moment for the
same table start one run, never two (deterministic run names plus adoption of an existing run).
Kopf peering keeps a second replica idle in a cluster; this is the safety net under it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine import Table
from txntable.launch import Backend, Launcher, LocalLauncher

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 22, 1, 30, tzinfo=UTC)


def manifests(location: Path) -> tuple[TxnTable, CompactionPolicy]:
    table = TxnTable.from_manifest(
        table_manifest(
            "events", location, metadata={"uid": "u1"}, compactionPolicyRef={"name": "p"}
        )
    )
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest("p", triggers={"smallFiles": 2}, spark={"backend": "Local"})
    )
    return table, policy


def test_two_controllers_racing_start_one_run(tmp_path: Path) -> None:
    location = tmp_path / "events"
    table = Table.create(str(location), pa.schema([("id", pa.int64())]))
    for i in range(4):
        table.append(pa.table({"id": [i]}))
    resource, policy = manifests(location)
    runs = tmp_path / "runs"
    # The stand-in job sleeps, so both controllers see the run in flight.
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(3)\nprint('{}')\n")

    def operator() -> Operator:
        launcher = LocalLauncher(runs, modules={}, env={})
        launcher.command = lambda req: ["python3", str(sleeper)]  # type: ignore[method-assign]

        def launchers(backend: Backend) -> Launcher:
            return launcher

        return Operator(config=Config.from_env({}), launchers=launchers, clock=lambda: NOW)

    barrier = threading.Barrier(2)
    ticks = []

    def reconcile(op: Operator) -> None:
        barrier.wait()
        ticks.append(op.reconcile(resource, [policy], []))

    threads = [threading.Thread(target=reconcile, args=(operator(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    names = {name for tick in ticks for name in tick.launched}
    assert len(ticks) == 2 and len(names) == 1
    assert [p.name for p in (runs / "default").iterdir() if not p.name.startswith(".")] == list(
        names
    )
