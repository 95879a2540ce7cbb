"""Phase, Ready and the metrics that watch them, tick by tick through ``Operator.reconcile``
(issues 23.6 and 23.7).

A failing compaction: Ready is False from the first failure until a run succeeds, also while the
retry runs (before: Ready=True again as soon as the retry started). After two runs out of memory
the table is held; a restarted controller reads the failures in a row back from the table's
status, so ``txntable_maintenance_consecutive_failures`` keeps saying 2 (before: the series was
gone after a restart, and a held table never ran again to bring it back, so the alert on it
could not fire). ``txntable_table_ready`` follows Ready, labelled by its reason.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tests.support.controller import T0, Controller, compaction, conditions, fragmented, txntable
from txntable.api.conditions import Reason
from txntable.launch import RunState

POLICY = compaction(spark={"autoSize": {"maxExecutorMemory": "8Gi"}})


def _oom(c: Controller, name: str) -> None:
    run = c.launcher.runs[name]
    c.launcher.runs[name] = replace(
        run,
        state=RunState.FAILED,
        finished=c.clock[0],
        message="exit code 137: OOMKilled",
        out_of_memory=True,
    )


def _until_launched(c: Controller, count: int, start: timedelta) -> timedelta:
    at = start
    while len(c.launcher.launched) < count and at < start + timedelta(hours=2):
        at += timedelta(seconds=30)
        c.tick(T0 + at, compaction=[POLICY])
    assert len(c.launcher.launched) == count
    return at


def test_ready_stays_false_from_a_failure_until_a_run_succeeds(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.tick(compaction=[POLICY])
    (first,) = c.launcher.launched
    c.clock[0] = T0 + timedelta(seconds=10)
    c.launcher.fail(first, "exit code 1: boom")
    tick = c.tick(T0 + timedelta(seconds=20), compaction=[POLICY])
    assert (str(tick.status.phase), conditions(tick)["Ready"]) == (
        "Degraded",
        ("False", Reason.RUN_FAILED),
    )
    at = _until_launched(c, 2, timedelta(seconds=20))
    retry = c.launcher.launched[1]
    tick = c.tick(T0 + at + timedelta(seconds=1), compaction=[POLICY])
    assert str(tick.status.phase) == "Compacting"
    assert conditions(tick)["Ready"] == ("False", Reason.RUN_FAILED)
    ready = {x.type: x for x in tick.status.conditions}["Ready"]
    assert retry in ready.message and "after 1 failure(s) in a row" in ready.message
    assert c.sample("txntable_table_ready", reason="RunFailed") == 0
    c.finish(retry, RunState.SUCCEEDED, {"numFilesRemoved": 12, "numFilesAdded": 2})
    quiet = [compaction(triggers={"smallFiles": 1000})]
    tick = c.tick(T0 + at + timedelta(seconds=60), compaction=quiet)
    assert conditions(tick)["Ready"] == ("True", Reason.TABLE_HEALTHY)
    assert str(tick.status.phase) == "Ready"
    assert c.sample("txntable_table_ready", reason="TableHealthy") == 1
    assert c.sample("txntable_table_ready", reason="RunFailed") is None  # one series per table
    assert c.sample("txntable_maintenance_consecutive_failures", kind="optimize") == 0


def test_failures_in_a_row_survive_a_restart_of_a_table_held_after_ooms(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.tick(compaction=[POLICY])
    (first,) = c.launcher.launched
    _oom(c, first)
    at = _until_launched(c, 2, timedelta(0))  # the memory retry
    _oom(c, c.launcher.launched[1])
    for s in range(30, 600, 30):
        tick = c.tick(T0 + at + timedelta(seconds=s), compaction=[POLICY])
    assert len(c.launcher.launched) == 2  # held: no retry can give it more memory
    compacting = {x.type: x for x in tick.status.conditions}["Compacting"]
    assert compacting.reason == Reason.BACKING_OFF and "not retried until" in compacting.message
    assert c.sample("txntable_maintenance_consecutive_failures", kind="optimize") == 2

    restarted = Controller(c.table, at=T0 + at + timedelta(minutes=20))  # new process
    restarted.launcher = c.launcher
    tick = restarted.tick(compaction=[POLICY])
    assert restarted.sample("txntable_maintenance_consecutive_failures", kind="optimize") == 2
    assert conditions(tick)["Ready"] == ("False", Reason.RUN_FAILED)
    assert restarted.sample("txntable_table_ready", reason="RunFailed") == 0
    assert restarted.sample("txntable_table_observe_interval_seconds") == 60


def test_the_observe_interval_metric_is_the_tables_own(tmp_path: Path) -> None:
    """``txntable_table_observe_interval_seconds`` is the interval the table is observed at,
    its spec.observeInterval, also below the controller's 30 s (the Kopf timer's interval,
    which no longer raises it: docs/adr/0009). The "not observed" alert compares with it."""
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t", observeInterval="10s"))
    c.tick(compaction=[POLICY])
    assert c.operator.config.observe_interval_seconds == 30
    assert c.sample("txntable_table_observe_interval_seconds") == 10
