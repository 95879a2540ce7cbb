"""A plan awaiting approval is announced once and keeps its planId while the status lags.

Kopf hands a tick the object as the last watch event showed it, so under load several ticks
in a row read a status from before the previous tick's patch
(tests/unit/handlers/test_stale_status.py). Two things were read from that status only:

* whether the AwaitingApproval Event was already posted (the Compacting condition saying so
  for this planId): every lagging tick posted it again;
* the planId status shows, which stays put while the work is the same: a lagging tick read no
  plan, so a commit that changed nothing the run would do gave the plan a new id (the new log
  version), and the id an engineer had copied from the status written a tick before, and
  annotated, no longer approved anything.

Here each lagging tick reads the status the table started with (none), the worst a lagging
watch can do; the harness and its real table are test_plan_in_status's
(``tests.support.plan_controller``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.support.controller import T0
from tests.support.plan_controller import Controller
from txntable.config import Config
from txntable.controller.tick import Operator, Tick


def lagging(c: Controller, seconds: float) -> Tick:
    """A tick that reads the table's status as it was before any tick (never caught up)."""
    c.clock[0] = T0 + timedelta(seconds=seconds)
    tick = c.operator.reconcile(c.table, [c.policy], [])
    c.events += [(e.reason, e.message) for e in tick.events]
    return tick


def announced(c: Controller) -> int:
    return [r for r, _ in c.events].count("AwaitingApproval")


def plan_id(tick: Tick) -> str:
    assert tick.status.plan is not None
    return tick.status.plan.plan_id


def test_the_wait_for_approval_is_announced_once_while_the_status_lags(tmp_path: Path) -> None:
    c = Controller(tmp_path, requireApproval=True)
    for s in (0, 30, 60, 90):
        lagging(c, s)
    assert announced(c) == 1
    assert c.launcher.launched == []


def test_a_restarted_controller_does_not_announce_the_same_wait_again(tmp_path: Path) -> None:
    c = Controller(tmp_path, requireApproval=True)
    c.tick(0)
    c.operator = Operator(  # nothing in memory: the status read says it was announced
        config=Config(default_backend="local"),
        launchers=lambda backend: c.launcher,
        clock=lambda: c.clock[0],
    )
    c.tick(30)
    assert announced(c) == 1


def test_the_plan_id_stays_while_the_status_lags(tmp_path: Path) -> None:
    c = Controller(tmp_path, requireApproval=True)
    shown = plan_id(lagging(c, 0))  # written, but the next ticks do not see it yet
    c.data.transaction().commit("NOOP")  # a commit that changes nothing the run would do
    assert plan_id(lagging(c, 30)) == shown
    # the engineer approves the id the status showed: it starts the run
    c.annotate(shown)
    lagging(c, 60)
    assert len(c.launcher.launched) == 1
    assert announced(c) == 1


def test_a_wait_for_a_plan_that_cannot_be_made_is_announced_once(tmp_path: Path) -> None:
    """No plan (a filter on a column the table does not have): the wait says no plan is known
    yet, with no planId to tell one wait from the next; it was announced at every tick."""
    missing = [{"column": "nope", "operator": "Equals", "values": ["x"]}]
    c = Controller(tmp_path, requireApproval=True, partitionFilters=missing)
    for s in (0, 30, 60):
        tick = c.tick(s)
    assert tick.status.plan is None
    assert c.compacting()[0] == "AwaitingApproval"
    assert announced(c) == 1
