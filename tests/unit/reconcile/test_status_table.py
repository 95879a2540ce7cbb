"""The (phase, Ready, reason) table (issue 23.6): every situation of one reconcile gives a row of
``reconcile.status.PHASES``, the row the situation calls for, and docs/operations.md shows the
same rows.

Before: Ready=True while a failed run's retry ran; Degraded (SmallFileBacklog) with Ready=True
for every table with small files, due or not; an unreachable table's Compacting condition said
"no compaction policy applies" while PolicyResolved said one matched; a pending approval showed
phase Degraded with no reason.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.decide import (
    HEALTH,
    NOW,
    checkpoint_policy,
    compaction,
    table,
)
from txntable.api.common import RunRecord
from txntable.api.conditions import Reason
from txntable.api.table import TablePhase
from txntable.api.types import RunOutcome
from txntable.reconcile import status as status_module
from txntable.reconcile.decide import ActiveRun, Decision
from txntable.reconcile.resolve import Resolution
from txntable.reconcile.status import (
    PHASES,
    UNREACHABLE,
    Failure,
    Outcome,
    StatusTableError,
    table_status,
    verdict,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
POLICY = compaction()
MATCHED = Resolution(POLICY, Reason.POLICY_MATCHED, "compaction policy nightly")
CKPT = checkpoint_policy()
CKPT_MATCHED = Resolution(CKPT, Reason.POLICY_MATCHED, "checkpoint policy ckpt")
NONE = Resolution(None, Reason.NO_POLICY, "no checkpoint policy selects this table")
#: a table with 60 small files of 100, a policy that wants 1,000 before it compacts
NOT_DUE = Decision(False, Reason.NOT_DUE, "no trigger fired")
LAUNCH = Decision(True, Reason.TRIGGERED, "60 small files >= 10")


def outcome(**changes: Any) -> Outcome:
    base: dict[str, Any] = {
        "now": NOW,
        "health": HEALTH,
        "failure": None,
        "compaction": MATCHED,
        "checkpoint": NONE,
        "compaction_decision": NOT_DUE,
        "vacuum_decision": Decision(False, Reason.DISABLED, "policy nightly does not vacuum"),
        "checkpoint_decision": None,
        "active": (),
        "last_compaction": None,
        "last_checkpoint": None,
    }
    return Outcome(**{**base, **changes})


def record(name: str, outcome: RunOutcome) -> RunRecord:
    return RunRecord(run_name=name, table="events", outcome=outcome, message="x")


def wait(why: Reason) -> Decision:
    return Decision(False, why, f"held: {why}")


CASES: list[tuple[str, dict[str, Any], dict[str, Any], TablePhase, bool, Reason]] = [
    ("healthy, nothing due", {}, {}, TablePhase.READY, True, Reason.TABLE_HEALTHY),
    ("due but waiting for a slot", {"compaction_decision": wait(Reason.CONCURRENCY_LIMIT)}, {},
     TablePhase.READY, True, Reason.TABLE_HEALTHY),
    ("outside the window", {"compaction_decision": wait(Reason.OUTSIDE_MAINTENANCE_WINDOW)}, {},
     TablePhase.READY, True, Reason.TABLE_HEALTHY),
    ("launching a compaction", {"compaction_decision": LAUNCH}, {},
     TablePhase.COMPACTING, True, Reason.TABLE_HEALTHY),
    ("a compaction in flight", {"active": (ActiveRun("opt-1", "optimize"),),
                                "compaction_decision": wait(Reason.RUN_IN_PROGRESS)}, {},
     TablePhase.COMPACTING, True, Reason.TABLE_HEALTHY),
    ("a checkpoint in flight", {"active": (ActiveRun("ckpt-1", "checkpoint"),),
                                "checkpoint": CKPT_MATCHED}, {},
     TablePhase.CHECKPOINTING, True, Reason.TABLE_HEALTHY),
    ("the last compaction failed, backing off",
     {"last_compaction": record("opt-1", RunOutcome.FAILED),
      "compaction_decision": wait(Reason.BACKING_OFF)}, {},
     TablePhase.DEGRADED, False, Reason.RUN_FAILED),
    ("the retry of a failed run in flight",
     {"active": (ActiveRun("opt-1-r1", "optimize"),),
      "last_compaction": record("opt-1-r1", RunOutcome.RUNNING),
      "retrying": ("compaction run opt-1-r1 retries after 1 failure(s) in a row",)}, {},
     TablePhase.COMPACTING, False, Reason.RUN_FAILED),
    ("the last checkpoint failed", {"last_checkpoint": record("c-1", RunOutcome.FAILED)}, {},
     TablePhase.DEGRADED, False, Reason.RUN_FAILED),
    ("a checkpoint in flight, the last compaction failed",
     {"active": (ActiveRun("ckpt-1", "checkpoint"),), "checkpoint": CKPT_MATCHED,
      "last_compaction": record("opt-1", RunOutcome.FAILED),
      "compaction_decision": wait(Reason.BACKING_OFF)}, {},
     TablePhase.CHECKPOINTING, False, Reason.RUN_FAILED),
    ("awaiting approval", {"compaction_decision": wait(Reason.AWAITING_APPROVAL)}, {},
     TablePhase.AWAITING_APPROVAL, True, Reason.AWAITING_APPROVAL),
    ("a launch refused for good", {"compaction_decision": wait(Reason.RUN_REJECTED)}, {},
     TablePhase.DEGRADED, False, Reason.RUN_REJECTED),
    ("a step the table's features stop",
     {"checkpoint": CKPT_MATCHED, "checkpoint_decision": wait(Reason.UNSUPPORTED_TABLE_FEATURE)},
     {}, TablePhase.DEGRADED, False, Reason.UNSUPPORTED_TABLE_FEATURE),
    ("a step stopped while compacting",
     {"checkpoint": CKPT_MATCHED, "checkpoint_decision": wait(Reason.UNSUPPORTED_TABLE_FEATURE),
      "compaction_decision": LAUNCH}, {},
     TablePhase.COMPACTING, False, Reason.UNSUPPORTED_TABLE_FEATURE),
    ("a schedule that never fires", {"compaction_decision": wait(Reason.INVALID_SPEC)}, {},
     TablePhase.DEGRADED, False, Reason.INVALID_SPEC),
    ("the named policy is missing",
     {"compaction": Resolution(None, Reason.POLICY_NOT_FOUND, "no such policy"),
      "compaction_decision": None}, {},
     TablePhase.DEGRADED, False, Reason.POLICY_NOT_FOUND),
    ("two policies select it",
     {"compaction": Resolution(None, Reason.POLICY_CONFLICT, "a, b"),
      "compaction_decision": None}, {},
     TablePhase.DEGRADED, False, Reason.POLICY_CONFLICT),
    ("the named policy is invalid",
     {"compaction": Resolution(None, Reason.INVALID_SPEC, "bad"), "compaction_decision": None},
     {}, TablePhase.DEGRADED, False, Reason.INVALID_SPEC),
    ("observed only: a writer feature",
     {"health": replace(HEALTH, writable=False, unwritable_reason="feature x"),
      "compaction_decision": wait(Reason.UNSUPPORTED_PROTOCOL)}, {},
     TablePhase.DEGRADED, False, Reason.UNSUPPORTED_PROTOCOL),
    ("the table is suspended", {"compaction_decision": wait(Reason.TABLE_SUSPENDED)},
     {"suspend": True}, TablePhase.SUSPENDED, False, Reason.TABLE_SUSPENDED),
    ("every policy is suspended",
     {"compaction": Resolution(compaction(suspend=True), Reason.POLICY_MATCHED, "nightly"),
      "compaction_decision": wait(Reason.POLICY_SUSPENDED)}, {},
     TablePhase.SUSPENDED, False, Reason.POLICY_SUSPENDED),
    *[(f"unreachable: {r}", {"health": None, "failure": Failure(r, f"{r} here"),
                              "compaction_decision": None, "vacuum_decision": None}, {},
       TablePhase.UNREACHABLE, False, r) for r in UNREACHABLE],
    ("unreachable while suspended",
     {"health": None, "failure": Failure(Reason.STORAGE_UNREACHABLE, "down"),
      "compaction_decision": None, "vacuum_decision": None}, {"suspend": True},
     TablePhase.UNREACHABLE, False, Reason.STORAGE_UNREACHABLE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "spec", "phase", "ready", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_each_situation_gives_its_row(
    changes: dict[str, Any], spec: dict[str, Any], phase: TablePhase, ready: bool, reason: Reason
) -> None:
    tbl = table(spec)
    out = outcome(**changes)
    judged = verdict(tbl, out)
    assert (judged.phase, judged.ready, judged.reason) == (phase, ready, reason)
    assert any(r.phase is phase and r.ready is ready and reason in r.reasons for r in PHASES), (
        "not a row of the table"
    )
    status = table_status(tbl, out)
    conds = {c.type: c for c in status.conditions}
    assert status.phase is phase
    assert (conds["Ready"].is_true, conds["Ready"].reason) == (ready, reason)
    assert conds["Ready"].message  # always says why
    # Degraded is Ready=False for a reason other than suspension, with that reason
    degraded = not ready and reason not in (Reason.TABLE_SUSPENDED, Reason.POLICY_SUSPENDED)
    assert conds["Degraded"].is_true is degraded
    if degraded:
        assert conds["Degraded"].reason == reason
    # a policy that matched is never said to be missing by the run conditions
    if conds["PolicyResolved"].is_true and out.compaction.policy is not None:
        assert "no compaction policy applies" not in conds["Compacting"].message
        assert "no vacuum policy applies" not in conds["Vacuuming"].message


def test_a_small_file_backlog_the_policy_does_not_want_compacted_is_no_degradation() -> None:
    """Issue 23.10: 60 of 100 files small, the policy waits for 1,000: before, phase Degraded
    (SmallFileBacklog) with Ready=True on every such table."""
    status = table_status(table(), outcome())
    conds = {c.type: c for c in status.conditions}
    assert status.phase is TablePhase.READY
    assert not conds["Degraded"].is_true and conds["Degraded"].reason == "AsExpected"
    assert conds["Compacting"].reason == Reason.NOT_DUE


def test_an_unreachable_table_does_not_say_no_policy_applies() -> None:
    out = outcome(health=None, failure=Failure(Reason.SECRET_NOT_FOUND, "Secret x missing"),
                  compaction_decision=None, vacuum_decision=None)  # fmt: skip
    conds = {c.type: c for c in table_status(table(), out).conditions}
    assert conds["PolicyResolved"].is_true
    assert conds["Compacting"].reason == Reason.SECRET_NOT_FOUND
    assert "Secret x missing" in conds["Compacting"].message
    assert conds["Checkpointing"].reason == Reason.NO_POLICY  # none applies: true


def test_a_combination_outside_the_table_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is enforced, not only written down: drop a row and its situation fails."""
    kept = tuple(r for r in PHASES if r.phase is not TablePhase.AWAITING_APPROVAL)
    monkeypatch.setattr(status_module, "PHASES", kept)
    with pytest.raises(StatusTableError, match="AwaitingApproval"):
        verdict(table(), outcome(compaction_decision=wait(Reason.AWAITING_APPROVAL)))


def test_every_row_is_reachable_and_each_reason_documented() -> None:
    reached = {(c[3], c[4], c[5]) for c in CASES}
    for row in PHASES:
        if row.phase is TablePhase.INVALID:
            continue  # written by the validate handler (test_invalid_manifests)
        assert any((row.phase, row.ready, r) in reached for r in row.reasons), row


def _docs_rows() -> list[tuple[str, str, set[str]]]:
    text = DOCS.read_text()
    start = text.index("<!-- phase-table -->")
    end = text.index("<!-- /phase-table -->")
    rows = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("phase", "---") or set(cells[0]) <= {"-"}:
            continue
        rows.append(
            (cells[0].strip("`"), cells[1].strip("`"), set(re.findall(r"`(\w+)`", cells[2])))
        )
    return rows


def test_docs_show_the_same_table() -> None:
    documented = _docs_rows()
    expected = [
        (r.phase.value, str(r.ready), {str(reason) for reason in r.reasons}) for r in PHASES
    ]
    assert documented == expected


def _conditions(status: Any) -> dict[str, tuple[str, str]]:
    return {str(c.type): (str(c.status), str(c.reason)) for c in status.conditions}


def test_a_fixed_spec_is_said_valid_again() -> None:
    """An invalid spec left SpecValid=False (``invalid_spec_status``); once the spec validates,
    the tick said Ready=True beside it, and the stale False stayed for good."""
    invalid = status_module.invalid_spec_status(1, "spec.location: required", NOW)
    fixed = table(status=invalid)
    assert _conditions(fixed.status)["SpecValid"] == ("False", "InvalidSpec")
    said = _conditions(table_status(fixed, outcome()))
    assert said["SpecValid"] == ("True", "SpecAccepted") and said["Ready"][0] == "True"
    # a table that never had an invalid spec gets no SpecValid condition
    assert "SpecValid" not in _conditions(table_status(table(), outcome()))
