"""A step that cannot work is tried once and said once (issue 23.5 and 23.8).

Through ``Operator.reconcile`` on a real table, tick by tick: a launch the launcher refuses for
good leaves the table Degraded with Ready=False (``RunRejected``), one Warning Event, and no
further attempt until the policy changes; a checkpoint the table's features stop is reported
once (``UnsupportedTableFeature``), is not retried at every back-off, and compaction goes on.

Before: phase Compacting with Ready=True and a ``RunRejected`` Warning at every tick; a checkpoint
failing forever with ``RunFailed`` and a growing back-off, the table Degraded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.controller import (
    T0,
    Controller,
    MemoryLauncher,
    checkpointing,
    compaction,
    conditions,
    fragmented,
    txntable,
)
from txntable.api.conditions import Reason
from txntable.config import Config
from txntable.controller import launching
from txntable.controller.tick import Operator
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.launch import RunRequest, RunState, RunStatus
from txntable.launch.errors import PermanentLaunchError


class RefusingLauncher(MemoryLauncher):
    """Refuses every run for good, as the SparkApplication launcher does where the Spark
    Operator's CRD is not installed (``KindNotServed``)."""

    def __init__(self, clock: Any) -> None:
        super().__init__(clock)
        self.tries = 0

    def launch(self, req: RunRequest) -> RunStatus:
        self.tries += 1
        raise PermanentLaunchError(
            "create SparkApplication: the API server does not serve SparkApplication here",
            reason="KindNotServed",
        )


def test_a_launch_refused_for_good_is_a_terminal_visible_state(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.launcher = RefusingLauncher(c.clock)
    policy = compaction()
    for s in range(0, 600, 30):
        tick = c.tick(T0 + timedelta(seconds=s), compaction=[policy])
    assert c.launcher.tries == 1  # not tried again while the policy is what it was
    conds = conditions(tick)
    assert str(tick.status.phase) == "Degraded"
    assert conds["Ready"] == ("False", Reason.RUN_REJECTED)
    assert conds["Compacting"] == ("False", Reason.RUN_REJECTED)
    ready = {x.type: x for x in tick.status.conditions}["Ready"]
    assert (
        "does not serve SparkApplication" in ready.message and "fix policy compact" in ready.message
    )
    (said,) = c.reasons("RunRejected")  # one Warning, not one per tick
    assert "does not serve SparkApplication" in said
    # a changed policy (a new generation) is tried again, once
    changed = replace(policy, metadata=replace(policy.metadata, generation=2))
    for s in range(600, 700, 30):
        c.tick(T0 + timedelta(seconds=s), compaction=[changed])
    assert c.launcher.tries == 2 and len(c.reasons("RunRejected")) == 1  # same reason: said


def test_a_launch_that_failed_now_is_tried_again_and_said_once(tmp_path: Path) -> None:
    from txntable.launch.errors import LaunchError

    class Flaky(MemoryLauncher):
        tries = 0

        def launch(self, req: RunRequest) -> RunStatus:
            self.tries += 1
            if self.tries <= 3:
                raise LaunchError("create Job: 503 Service Unavailable")
            return super().launch(req)

    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.launcher = Flaky(c.clock)
    for s in (0, 30, 60):
        tick = c.tick(T0 + timedelta(seconds=s), compaction=[compaction()])
        assert str(tick.status.phase) != "Compacting"  # nothing was started
        assert conditions(tick)["Compacting"] == ("False", Reason.RUN_LAUNCH_FAILED)
    assert len(c.reasons("RunLaunchFailed")) == 1
    tick = c.tick(T0 + timedelta(seconds=90), compaction=[compaction()])
    assert str(tick.status.phase) == "Compacting" and len(c.launcher.launched) == 1


def _unsupported(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The checkpoint writer refuses the table as it refuses a feature it cannot write."""
    calls: list[int] = []

    def refuse(snapshot: Any, **_: Any) -> Any:
        calls.append(snapshot.version)
        raise UnsupportedWriterFeatureError(
            "table requires writer feature(s) this engine does not support: typeWidening",
            ("typeWidening",),
        )

    monkeypatch.setattr(launching, "write_checkpoint", refuse)
    return calls


def test_a_step_a_table_feature_stops_is_said_once_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _unsupported(monkeypatch)
    fragmented(tmp_path / "t")  # 7 commits, 12 small files
    table = txntable(tmp_path / "t", checkpointPolicyRef={"name": "ckpt"})
    c = Controller(table)
    ckpt = [checkpointing(commitInterval=5, mode="Inline")]
    tick = c.tick(compaction=[compaction()], checkpoint=ckpt)
    assert calls == [6]
    conds = conditions(tick)
    assert conds["Checkpointing"] == ("False", Reason.UNSUPPORTED_TABLE_FEATURE)
    assert conds["Ready"] == ("False", Reason.UNSUPPORTED_TABLE_FEATURE)
    assert conds["Compacting"][0] == "True" and len(c.launcher.launched) == 1  # goes on
    (name,) = c.launcher.launched
    c.finish(name, RunState.SUCCEEDED, {"numFilesRemoved": 12, "numFilesAdded": 2})
    quiet = [compaction(triggers={"smallFiles": 1000})]  # nothing more to compact
    for minutes in range(1, 120, 7):  # two hours: many back-offs' worth
        tick = c.tick(T0 + timedelta(minutes=minutes), compaction=quiet, checkpoint=ckpt)
    assert calls == [6], "the step was tried again although the table did not change"
    conds = conditions(tick)
    assert conds["Checkpointing"] == ("False", Reason.UNSUPPORTED_TABLE_FEATURE)
    assert str(tick.status.phase) == "Degraded"
    assert conds["Ready"] == ("False", Reason.UNSUPPORTED_TABLE_FEATURE)
    (said,) = c.reasons("UnsupportedTableFeature")
    assert "typeWidening" in said and "compaction and VACUUM go on" in said
    assert c.reasons("RunFailed") == []  # not a failed run at every back-off
    failures = c.sample("txntable_maintenance_consecutive_failures", kind="checkpoint")
    assert failures == 1


def test_a_restarted_controller_tries_the_step_once_and_says_nothing_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _unsupported(monkeypatch)
    fragmented(tmp_path / "t")
    table = txntable(tmp_path / "t", checkpointPolicyRef={"name": "ckpt"})
    c = Controller(table)
    quiet = [compaction(triggers={"smallFiles": 1000})]
    ckpt = [checkpointing(commitInterval=5, mode="Inline")]
    c.tick(compaction=quiet, checkpoint=ckpt)
    fresh = Controller(c.table, at=T0 + timedelta(minutes=5))  # new process, status kept
    tick = fresh.tick(compaction=quiet, checkpoint=ckpt)
    tick = fresh.tick(T0 + timedelta(minutes=30), compaction=quiet, checkpoint=ckpt)
    assert calls == [6, 6]
    assert conditions(tick)["Checkpointing"] == ("False", Reason.UNSUPPORTED_TABLE_FEATURE)
    assert fresh.reasons("UnsupportedTableFeature") == []  # the status already says so


class ForbiddenLauncher(MemoryLauncher):
    """Refuses runs with 403 while ``allowed`` is False, as the API server does once the
    controller's Role lost ``create`` on the run's kind (issue 23's lifecycle tests)."""

    def __init__(self, clock: Any) -> None:
        super().__init__(clock)
        self.tries: list[datetime] = []
        self.allowed = False

    def launch(self, req: RunRequest) -> RunStatus:
        self.tries.append(self.clock[0])
        if not self.allowed:
            raise PermanentLaunchError(
                'create Job: HTTP 403 jobs.batch is forbidden: User "system:serviceaccount:'
                'txntable:txntable" cannot create resource "jobs" in API group "batch"',
                reason="Forbidden",
            )
        return super().launch(req)


def test_a_launch_refused_for_want_of_permission_is_tried_again_with_a_growing_back_off(
    tmp_path: Path,
) -> None:
    """A 403 is lifted by fixing the RBAC, not the policy: the launch is tried again after 1,
    2, 4, ... minutes (at most 30), said once, and the run starts once the verb is back,
    without a new policy generation or a restart. Before: held until either."""
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.launcher = launcher = ForbiddenLauncher(c.clock)
    policy = compaction()
    for s in range(0, 100 * 60, 30):  # 100 minutes, a tick every 30 s
        tick = c.tick(T0 + timedelta(seconds=s), compaction=[policy])
        compacting = {x.type: x for x in tick.status.conditions}["Compacting"]
        assert (compacting.status, compacting.reason) == ("False", Reason.RUN_REJECTED)
        assert "HTTP 403" in compacting.message and 'create resource "jobs"' in compacting.message
    gaps = [
        (b - a).total_seconds() / 60
        for a, b in zip(launcher.tries[:-1], launcher.tries[1:], strict=True)
    ]
    assert gaps == [1, 2, 4, 8, 16, 30, 30], gaps
    assert "tried again at" in compacting.message and "up to 30 min" in compacting.message
    assert "fix policy" not in compacting.message  # the policy is not what is wrong
    (said,) = c.reasons("RunRejected")  # one Warning, not one per try
    assert "HTTP 403" in said
    assert c.launcher.launched == []

    launcher.allowed = True  # the verb given back; the next try (at most 30 min on) starts it
    last = launcher.tries[-1]
    for s in range(100 * 60, 140 * 60, 30):
        tick = c.tick(T0 + timedelta(seconds=s), compaction=[policy])
    assert len(c.launcher.launched) == 1 and launcher.tries[-1] - last <= timedelta(minutes=30)
    assert str(tick.status.phase) == "Compacting"


def test_the_permission_back_off_is_a_setting(tmp_path: Path) -> None:
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    c.launcher = launcher = ForbiddenLauncher(c.clock)
    c.operator = Operator(
        config=Config(default_backend="local", permission_retry_seconds=2),
        launchers=lambda backend: launcher,
        clock=lambda: c.clock[0],
    )
    for s in range(0, 12):
        c.tick(T0 + timedelta(seconds=s), compaction=[compaction()])
    assert [(t - T0).total_seconds() for t in launcher.tries] == [0, 2, 6]
