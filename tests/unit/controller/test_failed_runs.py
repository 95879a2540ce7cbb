"""A failing maintenance run through ``Operator.reconcile`` tick by tick, on a clock the test
moves (issue 13.4): each finished run is recorded once with its reason, the next attempt waits
for the back-off (which doubles per failure in a row) and gets a new name, and the phase stays
Degraded while the operator backs off.

The launcher is an in-memory implementation of the ``Launcher`` interface; the table is real.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.controller import T0, Harness, fragmented, resources
from tests.support.health_oracle import observe
from txntable.api.conditions import Reason
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine import Table
from txntable.launch import Backoff
from txntable.reconcile.decide import Retry, Work, decide_compaction

REASON = 'exit code 1: ValueError: column "v" has type string, expected double'


def test_each_failed_run_is_recorded_once_and_retried_after_a_growing_back_off(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path)
    backoff = Backoff()
    h.tick(T0)
    assert len(h.launcher.launched) == 1 and h.phases[-1] == "Compacting"
    first = h.launcher.launched[0]
    ended = T0 + timedelta(seconds=5)
    h.clock[0] = ended
    h.launcher.fail(first, REASON)
    # The status write of the tick that records the failure may not be seen by the next tick
    # (the watch lags behind the patch): the failure is still recorded once.
    h.tick(ended + timedelta(seconds=1), write_status=False)
    tick = h.tick(ended + timedelta(seconds=2))
    for s in range(3, 20):
        tick = h.tick(ended + timedelta(seconds=s))
    assert h.launcher.launched == [first]
    assert len(h.reasons("RunStarted")) == 1
    failed = h.reasons("RunFailed")
    assert len(failed) == 1 and REASON in failed[0] and first in failed[0]
    assert set(h.phases[1:]) == {"Degraded"}
    record = tick.status.last_compaction
    assert record is not None and record.outcome == "Failed" and REASON in (record.message or "")
    conds = {c.type: c for c in tick.status.conditions}
    assert conds["Compacting"].reason == "BackingOff" and "attempt 1" in conds["Compacting"].message
    assert conds["Ready"].status == "False"

    # The retry comes once the back-off after one failure is over, as attempt 1 (new name).
    wait_1 = backoff.delay(1, "uid-1/optimize")
    h.tick(ended + timedelta(seconds=wait_1 - 1))
    assert len(h.launcher.launched) == 1
    h.tick(ended + timedelta(seconds=wait_1 + 1))
    assert len(h.launcher.launched) == 2
    second = h.launcher.launched[1]
    assert second.endswith("-r1") and second != first
    assert h.phases[-1] == "Compacting"

    # It fails too: the back-off after two failures in a row is longer.
    ended_2 = ended + timedelta(seconds=wait_1 + 30)
    h.clock[0] = ended_2
    h.launcher.fail(second, "exit code 2: killed")
    wait_2 = backoff.delay(2, "uid-1/optimize")
    assert wait_2 > wait_1 + 1
    h.tick(ended_2 + timedelta(seconds=1))
    h.tick(ended_2 + timedelta(seconds=wait_1 + 1))  # over the first back-off, not the second
    assert len(h.launcher.launched) == 2
    h.tick(ended_2 + timedelta(seconds=wait_2 + 1))
    assert h.launcher.launched[2].endswith("-r2")
    assert len(h.reasons("RunStarted")) == 3 and len(h.reasons("RunFailed")) == 2
    assert "killed" in h.reasons("RunFailed")[1]


def test_a_restarted_controller_does_not_announce_a_finished_run_as_started(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path)
    h.tick(T0)
    first = h.launcher.launched[0]
    h.launcher.fail(first, REASON)
    h.table = replace(h.table, status=replace(h.table.status, last_compaction=None))
    h.operator = Operator(  # a new controller: empty memory, a status without the run
        config=Config(default_backend="local"),
        launchers=lambda backend: h.launcher,
        clock=lambda: h.clock[0],
    )
    for s in range(1, 10):
        h.tick(T0 + timedelta(seconds=s))
    assert h.launcher.launched == [first]
    assert len(h.reasons("RunStarted")) == 1 and len(h.reasons("RunFailed")) == 1


@pytest.mark.parametrize("offset, launches", [(-1, False), (0, True), (60, True)])
def test_decide_holds_a_launch_until_the_back_off_is_over(
    tmp_path: Path, offset: int, launches: bool
) -> None:
    fragmented(tmp_path / "t")
    table, policy = resources(tmp_path / "t")
    health = observe(Table.open(str(tmp_path / "t")).snapshot(), policy.spec.min_file_size)
    retry = Retry(3, T0, "run x failed")
    work: Any = Work(T0 + timedelta(seconds=offset), retries={"optimize": retry})
    decision = decide_compaction(table, policy, health, work)
    assert decision.launch is launches
    if launches:
        assert decision.attempt == 3
    else:
        assert decision.why is Reason.BACKING_OFF and "attempt 3" in decision.message
