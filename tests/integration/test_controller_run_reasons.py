"""A failed run's reason is the job's own, and a run that partly succeeded says so (issue 23.1).

The issue's case, with real parts: ``Operator.reconcile`` ticks a fragmented table with the local
launcher, which runs the real compaction job on Spark (``local[1]``); the policy's VACUUM
retention (1 hour) is below the table's (7 days), so the job commits its bins, then VACUUM
refuses and the job exits 1 with the reason in its JSON result line. Spark's log on stderr carries
its own ``WARN``/``INFO`` lines: before, when stderr ended with them, status, the RunFailed Event
and ``notReady`` said ``exit code 1: ... WARN NativeCodeLoader ...`` (the last stderr line) and
nothing of the commit. The jobs now also end stderr with their own one-line error.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.support.kmock_controller import fragmented_table
from tests.support.manifests import compaction_policy_manifest
from tests.support.vacuum_policy import resources
from txntable.api.types import CompactionPolicy
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine import Table
from txntable.launch import LocalLauncher
from txntable.launch.run import LOG_NOISE
from txntable.observability.controller_metrics import ControllerMetrics

pytestmark = pytest.mark.integration


def test_a_run_that_committed_then_failed_its_vacuum_says_both(tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location, appends=4)  # 8 small files in 2 partitions
    table, _ = resources(location)  # the TxnTable "events" naming policy "tidy"
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "tidy",
            triggers={"smallFiles": 4, "cooldown": "1h"},
            vacuum={"enabled": True, "retention": "1h"},  # below the table's 7 days
            spark={"backend": "Local", "executor": {"instances": 1, "cores": 1}},
        )
    )
    runs = tmp_path / "runs"
    launcher = LocalLauncher(runs, grace_seconds=5)
    metrics = ControllerMetrics(CollectorRegistry())
    operator = Operator(
        config=Config(default_backend="local"),
        launchers=lambda backend: launcher,
        clock=lambda: datetime.now(UTC),
        metrics=metrics,
    )
    events = []
    tick = operator.reconcile(table, [policy], [])
    table = replace(table, status=tick.status)
    (name,) = tick.launched
    deadline = time.monotonic() + 300  # against a hang, not a timing assertion
    while time.monotonic() < deadline:
        tick = operator.reconcile(table, [policy], [])
        table = replace(table, status=tick.status)
        events += tick.events
        record = tick.status.last_compaction
        if record is not None and record.outcome not in (None, "Running"):
            break
        time.sleep(0.5)
    record = tick.status.last_compaction
    assert record is not None and record.run_name == name and record.outcome == "Failed", record

    # Spark's log on stderr really carries noise (the old code reported its last line); the job
    # now also ends stderr with its own one-line error, which never says what was committed: only
    # the JSON result line does, so "partly done" below can come from nowhere else
    stderr = (runs / "default" / name / "stderr.log").read_text()
    assert any(LOG_NOISE.search(ln) for ln in stderr.splitlines() if ln.strip()), stderr
    assert "partly done" not in stderr

    message = record.message or ""
    assert "partly done: the compaction committed 2 bin(s)" in message, message
    assert "vacuum: retention 1 h is shorter than the table's" in message, message
    assert "WARN" not in message and "NativeCodeLoader" not in message and "INFO" not in message
    (failed,) = [e.message for e in events if e.reason == "RunFailed"]
    assert "partly done" in failed and "is shorter than the table's" in failed
    ready = {c.type: c for c in tick.status.conditions}["Ready"]
    assert ready.reason == "RunFailed" and not ready.is_true
    labels = {"namespace": "default", "table": "events", "kind": "optimize"}
    sample = metrics.registry.get_sample_value
    assert sample("txntable_maintenance_partial_runs_total", labels) == 1
    assert sample("txntable_maintenance_runs_total", {**labels, "outcome": "failed"}) == 1
    assert sample("txntable_maintenance_files_removed_total", labels) == 8
    # the commit is in the table; nothing was vacuumed
    assert len(Table.open(str(location)).snapshot().files()) == 2
