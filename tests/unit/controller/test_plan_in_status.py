"""The plan in status and its approval, through ``Operator.reconcile`` tick by tick (issue 16.1).

A real fragmented table, the in-memory launcher of ``tests.support.controller`` and a clock the
test moves: status.plan says what the next run would rewrite (the figures ``reconcile.plan``
computes from the table's summary), an idle table's status stays the same object's worth from
tick to tick, and under ``spec.requireApproval`` a due compaction launches only once the table
carries ``txntable.io/approve-plan`` naming the current planId; the wait is announced once per
plan.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.plan_controller import Controller
from txntable.api.constants import ANNOTATION_APPROVE_PLAN
from txntable.api.meta import ObjectMeta
from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import TxnTableStatus
from txntable.config import Config
from txntable.controller import foresee
from txntable.controller import tick as tick_module
from txntable.controller.tick import Observed, Operator
from txntable.engine.read.summary import TableSummary
from txntable.launch.sizing import RunSize, SizedFrom, size
from txntable.reconcile.plan import CompactionPlan, plan_from_summary


def test_status_plan_is_the_plan_of_the_tables_summary(tmp_path: Path) -> None:
    c = Controller(tmp_path, suspend=True)  # observe, never launch
    tick = c.tick(0)
    plan = tick.status.plan
    assert plan is not None
    expected = plan_from_summary(
        TableSummary.load(c.data.storage), OptimizeOptions.from_spec(c.policy.spec)
    )
    # the work's hash, with the log version it was first planned at (what an approval names)
    assert plan.plan_id == f"{expected.plan_id}-v6"
    assert (plan.bins, plan.files, plan.input_bytes) == (2, 12, expected.input_bytes)
    assert plan.largest_bin_bytes == expected.largest_bin_bytes
    assert {p.partition for p in plan.partitions} == {"part = 'a'", "part = 'b'"}
    assert plan.exact and plan.note is None and plan.vacuum_files is None
    assert plan.estimated_seconds is None  # no run has reported its throughput yet
    rendered = tick.status.to_status()["plan"]
    assert rendered["planId"] == plan.plan_id and rendered["inputBytes"] == plan.input_bytes
    assert TxnTableStatus.from_dict(tick.status.to_status()) == tick.status  # as Kopf reads it
    # an idle table: the same status at the next ticks (nothing to patch)
    assert c.tick(60).status == tick.status
    assert c.tick(11 * 60).status == tick.status  # past the plan's refresh: recomputed, same
    c.append(99)
    changed = c.tick(12 * 60).status.plan
    assert changed is not None and changed.files == 14 and changed.plan_id != plan.plan_id


def test_a_due_compaction_waits_for_approval_of_the_current_plan(tmp_path: Path) -> None:
    c = Controller(tmp_path, requireApproval=True)
    first = c.tick(0)
    assert c.launcher.launched == []
    plan_id = first.status.plan.plan_id if first.status.plan else ""
    reason, message = c.compacting()
    assert reason == "AwaitingApproval"
    assert f"{ANNOTATION_APPROVE_PLAN}={plan_id}" in message
    for s in (30, 60, 90):
        c.tick(s)
    assert [r for r, _ in c.events].count("AwaitingApproval") == 1  # announced once
    assert c.launcher.launched == []

    c.annotate("0123456789ab")  # an earlier plan's id approves nothing
    c.tick(120)
    reason, message = c.compacting()
    assert reason == "AwaitingApproval" and "approved an earlier plan" in message
    assert c.launcher.launched == []

    c.annotate(plan_id)
    c.append(50)  # ...but the work changed before the controller saw the approval
    changed = c.tick(150)
    new_id = changed.status.plan.plan_id if changed.status.plan else ""
    assert new_id != plan_id and c.launcher.launched == []
    assert c.compacting()[0] == "AwaitingApproval" and new_id in c.compacting()[1]
    assert [r for r, _ in c.events].count("AwaitingApproval") == 2  # the new plan is announced

    c.annotate(new_id)
    c.tick(180)
    assert len(c.launcher.launched) == 1
    assert c.compacting()[0] == "RunStarted"


def test_an_approval_starts_one_run_of_one_plan(tmp_path: Path) -> None:
    """Issue 23.4: the approval is spent by the run it started (``status.spentApproval``).
    The run fails having changed nothing, so the same work is due again: the old approval no
    longer counts, the plan gets a new id, and only its approval starts the next run. Identical
    data arriving later is a new plan too (another log version), needing its own approval."""
    c = Controller(tmp_path, requireApproval=True, failedRunsHistoryLimit=0)
    plan_id = c.tick(0).status.plan.plan_id  # type: ignore[union-attr]
    c.annotate(plan_id)
    started = c.tick(30)
    assert len(c.launcher.launched) == 1 and started.status.spent_approval == plan_id
    assert started.status.to_status()["spentApproval"] == plan_id
    c.launcher.fail(c.launcher.launched[0], "exit code 1: boom")
    for s in range(60, 60 * 60, 60):  # long past the back-off of one failure
        tick = c.tick(s)
    assert len(c.launcher.launched) == 1, "the spent approval started a second run"
    again = tick.status.plan.plan_id  # type: ignore[union-attr]
    assert again != plan_id and again.split("-v")[0] == plan_id.split("-v")[0]  # same work
    reason, message = c.compacting()
    assert reason == "AwaitingApproval" and "was spent on an earlier run" in message
    c.annotate(again)
    c.tick(60 * 60)
    assert len(c.launcher.launched) == 2  # the new approval starts one more run
    # a restarted controller (nothing in memory) reads the spent approval from status
    c.operator = Operator(
        config=Config(default_backend="local"),
        launchers=lambda backend: c.launcher,
        clock=lambda: c.clock[0],
    )
    c.launcher.runs.clear()
    c.table = replace(c.table, status=replace(c.table.status, last_compaction=None))
    c.tick(2 * 60 * 60)
    assert len(c.launcher.launched) == 2 and c.compacting()[0] == "AwaitingApproval"


def test_identical_work_arriving_later_needs_a_new_approval(tmp_path: Path) -> None:
    c = Controller(tmp_path, suspend=True)
    first = c.tick(0).status.plan
    assert first is not None
    # the same work at a later version (an empty commit changes no file): the id is kept
    c.data.transaction().commit("NOOP")
    assert c.tick(60).status.plan.plan_id == first.plan_id  # type: ignore[union-attr]
    # the plan's approval is spent (a run started on it): the same work gets a new id
    c.table = replace(c.table, status=replace(c.table.status, spent_approval=first.plan_id))
    later = c.tick(120).status.plan
    assert later is not None and later.plan_id != first.plan_id
    assert later.plan_id.split("-v")[0] == first.plan_id.split("-v")[0]


def test_without_require_approval_the_annotation_is_not_needed(tmp_path: Path) -> None:
    c = Controller(tmp_path)
    c.tick(0)
    assert len(c.launcher.launched) == 1
    assert not any(r == "AwaitingApproval" for r, _ in c.events)


def test_annotations_are_read_from_the_manifest() -> None:
    meta = ObjectMeta.from_dict({"name": "t", "annotations": {ANNOTATION_APPROVE_PLAN: "abc"}})
    assert meta.annotations[ANNOTATION_APPROVE_PLAN] == "abc"
    assert dict(ObjectMeta.from_dict({"name": "t"}).annotations) == {}


def test_the_run_is_sized_from_the_plan_in_status_planned_once_per_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned: list[int] = []

    def counting(summary: TableSummary, *args: Any, **kwargs: Any) -> CompactionPlan:
        planned.append(summary.version)
        return plan_from_summary(summary, *args, **kwargs)

    monkeypatch.setattr(foresee, "plan_from_summary", counting)
    c = Controller(tmp_path, spark={"autoSize": {"enabled": True, "maxExecutorInstances": 4}})
    first = c.tick(0)
    assert len(c.launcher.launched) == 1  # 12 small files: due at once
    run = c.launcher.runs[c.launcher.launched[0]]
    assert run.sizing is not None and run.sizing.sized_from is SizedFrom.PLAN
    assert first.status.plan is not None and first.status.plan.bins == 2
    assert planned == [6]  # versions 0-6: the plan in status, and the run sized from it
    c.tick(30)  # nothing changed: no planning at all
    assert planned == [6]
    c.append(99)
    c.tick(60)
    assert planned == [6, 7]  # one planning per change of the log
    # a plan made under another generation of the policy is not the current one
    observed = c.operator.memories.peek("uid-1", Observed)
    assert observed is not None and observed.summary is not None
    summary = observed.summary
    newer = replace(c.policy, metadata=replace(c.policy.metadata, generation=2))
    assert c.operator.foresight.current("uid-1", c.policy, summary) is not None
    assert c.operator.foresight.current("uid-1", newer, summary) is None


def test_status_plan_shows_the_resources_its_run_is_launched_with(tmp_path: Path) -> None:
    c = Controller(tmp_path, spark={"autoSize": {"enabled": True, "maxExecutorInstances": 4}})
    tick = c.tick(0)
    assert len(c.launcher.launched) == 1
    run = c.launcher.runs[c.launcher.launched[0]]
    shown = tick.status.plan.resources if tick.status.plan else None
    assert shown is not None and run.sizing is not None
    assert shown.sized_from == "Plan" == run.sizing.sized_from.value
    assert (shown.executors, shown.executor_cores) == (
        run.sizing.executor_instances,
        run.sizing.executor_cores,
    )
    assert shown.executor_memory_bytes == run.sizing.executor_memory
    assert shown.driver_memory_bytes == run.sizing.driver_memory and shown.reason
    rendered = tick.status.to_status()["plan"]["resources"]
    assert rendered["sizedFrom"] == "Plan" and rendered["executorMemoryBytes"] > 0
    assert TxnTableStatus.from_dict(tick.status.to_status()) == tick.status


def test_a_launching_tick_sizes_its_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24.3 and 32.2: status.plan's resources and the launch are one sizing, made once a
    tick by the one sizing function (before, each asked the sizer, so a launching tick sized
    the run twice)."""
    sized: list[RunSize] = []

    def counting(*args: Any, **kwargs: Any) -> RunSize:
        sized.append(size(*args, **kwargs))
        return sized[-1]

    monkeypatch.setattr(tick_module, "size", counting)
    c = Controller(tmp_path, spark={"autoSize": {"enabled": True, "maxExecutorInstances": 4}})
    tick = c.tick(0)
    assert len(c.launcher.launched) == 1 and tick.status.plan is not None
    assert len(sized) == 1
    launched = c.launcher.runs[c.launcher.launched[0]].sizing
    assert launched is not None and launched.to_annotation() == sized[0].sizing.to_annotation()
    c.tick(30)  # a run in flight: status shows the plan, nothing is launched
    assert len(sized) == 2


def test_without_auto_size_status_plan_shows_the_policys_own_figures(tmp_path: Path) -> None:
    c = Controller(tmp_path, suspend=True, spark={"executor": {"instances": 3, "cores": 2}})
    plan = c.tick(0).status.plan
    assert plan is not None and plan.resources is not None
    assert plan.resources.sized_from == "Policy"
    assert (plan.resources.executors, plan.resources.executor_cores) == (3, 2)
