"""Every decision of the controller, table-driven: a resource, a policy, an observed table and
the work in flight go in; whether to start a run, and why not, comes out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.decide import HEALTH, NOW, checkpoint_policy, compaction, last_run, table, work
from txntable.api.conditions import Reason
from txntable.api.errors import InvalidSpecError
from txntable.api.types import CheckpointPolicy, CompactionPolicy, RunRecord, TxnTable
from txntable.reconcile.decide import (
    ActiveRun,
    Hold,
    Placement,
    Retry,
    Work,
    decide_checkpoint,
    decide_compaction,
    decide_vacuum,
    outcome_of,
    vacuumed,
)
from txntable.reconcile.health import TableHealth
from txntable.reconcile.resolve import resolve


@pytest.mark.parametrize(
    ("tbl", "policy", "health", "wrk", "launch", "why"),
    [
        (table(), compaction(), HEALTH, work(), True, Reason.TRIGGERED),
        (table({"suspend": True}), compaction(), HEALTH, work(), False, Reason.TABLE_SUSPENDED),
        (table(), compaction(suspend=True), HEALTH, work(), False, Reason.POLICY_SUSPENDED),
        (
            table(),
            compaction(),
            replace(HEALTH, writable=False, unwritable_reason="columnMapping"),
            work(),
            False,
            Reason.UNSUPPORTED_PROTOCOL,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active=(ActiveRun("r0", "optimize"),), active_total=1),
            False,
            Reason.RUN_IN_PROGRESS,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active=(ActiveRun("c0", "checkpoint"),), active_total=1),
            True,
            Reason.TRIGGERED,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            False,
            Reason.CONCURRENCY_LIMIT,
        ),
        (
            table(),
            compaction(),
            replace(HEALTH, small_files=3, compactable_small_files=1),
            work(),
            False,
            Reason.NOTHING_TO_DO,
        ),
        (table(), compaction(), replace(HEALTH, small_files=5), work(), False, Reason.NOT_DUE),
        (
            table(),
            compaction(maintenanceWindows=[{"start": "22:00", "end": "02:00"}]),
            HEALTH,
            work(),
            False,
            Reason.OUTSIDE_MAINTENANCE_WINDOW,
        ),
        (
            table(),
            compaction(maintenanceWindows=[{"start": "02:00", "end": "04:00"}]),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),
        (
            table(),
            compaction(
                maintenanceWindows=[{"start": "03:00", "end": "04:00"}], timeZone="Europe/Berlin"
            ),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),
        (table(status=last_run(5)), compaction(), HEALTH, work(), False, Reason.COOLDOWN),
        (table(status=last_run(20)), compaction(), HEALTH, work(), True, Reason.TRIGGERED),
        (
            table(),
            compaction(triggers={"commitsSinceLastRun": 41}),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),
        (
            table(status=last_run(60, version=35)),
            compaction(triggers={"commitsSinceLastRun": 6}),
            HEALTH,
            work(),
            False,
            Reason.NOT_DUE,
        ),
        (
            table(),
            compaction(triggers={"smallFilePercent": 50}),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),
        (
            table(),
            compaction(triggers={"smallFilePercent": 70}),
            HEALTH,
            work(),
            False,
            Reason.NOT_DUE,
        ),
        (
            table(),
            compaction(triggers={"schedule": "0 2 * * *"}),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),
        (
            table(),
            compaction(triggers={"schedule": "0 1 * * *"}),
            HEALTH,
            work(),
            False,
            Reason.NOT_DUE,
        ),  # fired 90 minutes ago: past the starting deadline, no previous run
        (
            table(status=last_run(60 * 25)),
            compaction(triggers={"schedule": "0 1 * * *"}),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
        ),  # missed since the last run: catch up once
    ],
    ids=[
        "due",
        "table-suspended",
        "policy-suspended",
        "unwritable",
        "compaction-running",
        "checkpoint-running",
        "concurrency-limit",
        "too-few-compactable",
        "below-threshold",
        "outside-window",
        "inside-window",
        "inside-window-berlin",
        "cooldown",
        "after-cooldown",
        "commits-since-run-due",
        "commits-since-run-not-due",
        "small-file-percent-due",
        "small-file-percent-not-due",
        "schedule-fired",
        "schedule-past-deadline",
        "schedule-missed-catch-up",
    ],
)
def test_compaction_decisions(
    tbl: TxnTable,
    policy: CompactionPolicy,
    health: TableHealth,
    wrk: Work,
    launch: bool,
    why: Reason,
) -> None:
    decision = decide_compaction(tbl, policy, health, wrk)
    assert (decision.launch, decision.why) == (launch, why), decision.message
    assert decision.message
    if launch:
        assert decision.scheduled_time is not None


def test_replace_policy_replaces_the_running_compaction() -> None:
    decision = decide_compaction(
        table(),
        compaction(concurrencyPolicy="Replace"),
        HEALTH,
        work(active=(ActiveRun("old", "optimize"),), active_total=1),
    )
    assert decision.launch and decision.replace_runs == ("old",)


def test_schedule_slot_is_deterministic() -> None:
    pol = compaction(triggers={"schedule": "0 2 * * *"})
    a = decide_compaction(table(), pol, HEALTH, work(now=NOW))
    b = decide_compaction(table(), pol, HEALTH, work(now=NOW + timedelta(seconds=40)))
    assert a.scheduled_time == b.scheduled_time == datetime(2026, 11, 22, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("policy", "health", "wrk", "launch", "why", "placement"),
    [
        (
            checkpoint_policy(commitInterval=10),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
            Placement.INLINE,
        ),
        (checkpoint_policy(commitInterval=11), HEALTH, work(), False, Reason.NOT_DUE, None),
        (
            checkpoint_policy(commitInterval=10, mode="Spark"),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
            Placement.SPARK,
        ),
        (
            checkpoint_policy(commitInterval=10, inlineMaxActions=50),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
            Placement.SPARK,
        ),
        (
            checkpoint_policy(commitInterval=10, mode="Spark"),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            False,
            Reason.CONCURRENCY_LIMIT,
            None,
        ),
        (
            checkpoint_policy(commitInterval=10),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            True,
            Reason.TRIGGERED,
            Placement.INLINE,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="1h"),
            HEALTH,
            work(),
            True,
            Reason.TRIGGERED,
            Placement.INLINE,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="3h"),
            HEALTH,
            work(),
            False,
            Reason.NOT_DUE,
            None,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="1h"),
            replace(HEALTH, commits_since_checkpoint=0),
            work(),
            False,
            Reason.NOT_DUE,
            None,
        ),
        (checkpoint_policy(suspend=True), HEALTH, work(), False, Reason.POLICY_SUSPENDED, None),
        (
            checkpoint_policy(),
            HEALTH,
            work(active=(ActiveRun("c", "checkpoint"),)),
            False,
            Reason.RUN_IN_PROGRESS,
            None,
        ),
        (
            checkpoint_policy(),
            replace(HEALTH, maintainable=False, unmaintainable_reason="x"),
            work(),
            False,
            Reason.UNSUPPORTED_PROTOCOL,
            None,
        ),
        # a checkpoint changes no row: a table OPTIMIZE cannot rewrite still gets checkpoints
        (
            checkpoint_policy(),
            replace(HEALTH, writable=False, unwritable_reason="variantShredding"),
            work(),
            True,
            Reason.TRIGGERED,
            Placement.INLINE,
        ),
    ],
    ids=[
        "interval-inline",
        "interval-not-due",
        "interval-spark-mode",
        "over-inline-max-actions-spark",
        "spark-concurrency-limit",
        "inline-ignores-concurrency-limit",
        "max-age-due",
        "max-age-not-due",
        "max-age-no-new-commits",
        "policy-suspended",
        "checkpoint-running",
        "unmaintainable",
        "not-rewritable-still-checkpointed",
    ],
)
def test_checkpoint_decisions(
    policy: CheckpointPolicy,
    health: TableHealth,
    wrk: Work,
    launch: bool,
    why: Reason,
    placement: Placement | None,
) -> None:
    decision = decide_checkpoint(table(), policy, health, wrk)
    assert (decision.launch, decision.why, decision.placement) == (launch, why, placement)


def test_policy_resolution() -> None:
    selector_all = compaction("a", tableSelector={"matchLabels": {"tier": "gold"}})
    selector_too = compaction(
        "b",
        tableSelector={
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]
        },
    )
    gold = table(labels={"tier": "gold"})
    assert resolve(gold, [selector_all], "compaction").policy is selector_all
    both = resolve(gold, [selector_all, selector_too], "compaction")
    assert both.policy is None and both.reason == "PolicyConflict" and "a, b" in both.message
    named = table({"compactionPolicyRef": {"name": "b"}}, labels={"tier": "gold"})
    assert resolve(named, [selector_all, selector_too], "compaction").policy is selector_too
    missing = table({"compactionPolicyRef": {"name": "zzz"}})
    assert resolve(missing, [selector_all], "compaction").reason == "PolicyNotFound"
    assert resolve(table(labels={"tier": "bronze"}), [selector_all], "compaction").reason == (
        "NoPolicy"
    )


def test_outcomes() -> None:
    assert outcome_of(None, succeeded=False) == "Failed"
    assert outcome_of({"numFilesRemoved": 0, "numFilesAdded": 0}, True) == "NothingToDo"
    assert (
        outcome_of(
            {"binsSkipped": 2, "binsCommitted": 0, "numFilesRemoved": 0, "numFilesAdded": 0}, True
        )
        == "Conflicted"
    )
    assert outcome_of({"numFilesRemoved": 9, "numFilesAdded": 1}, True) == "Succeeded"


def test_last_run_record_round_trip() -> None:
    rec = table(status=last_run(5)).status.last_compaction
    assert isinstance(rec, RunRecord) and rec.version == 35


# -- VACUUM-only runs: a table with garbage and nothing to compact --------------------------
#: a table compaction leaves alone (no small files) with 5 MB reclaimable
CLEAN = replace(HEALTH, small_files=0, small_file_bytes=0, compactable_small_files=0)
GARBAGE = replace(CLEAN, reclaimable_bytes=5_000_000)


def vacuuming(spec: dict[str, Any] | None = None, **vacuum: Any) -> CompactionPolicy:
    return compaction(**(spec or {}), vacuum={"enabled": True, **vacuum})


def vacuumed_ago(hours: float) -> dict[str, Any]:
    t = (NOW - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"lastVacuumTime": t}


def vacuum_decision(
    tbl: TxnTable, policy: CompactionPolicy, health: TableHealth, wrk: Work
) -> tuple[Any, Any]:
    """Both decisions of a tick, as the controller takes them: compaction first."""
    comp = decide_compaction(tbl, policy, health, wrk)
    return comp, decide_vacuum(tbl, policy, health, wrk, comp)


@pytest.mark.parametrize(
    ("tbl", "policy", "health", "wrk", "launch", "why"),
    [
        # never vacuumed, or last vacuumed longer ago than the interval (default 24h)
        (table(), vacuuming(), GARBAGE, work(), True, Reason.TRIGGERED),
        (table(status=vacuumed_ago(25)), vacuuming(), GARBAGE, work(), True, Reason.TRIGGERED),
        (table(status=vacuumed_ago(2)), vacuuming(interval="1h"), GARBAGE, work(), True,
         Reason.TRIGGERED),
        # inside the interval
        (table(status=vacuumed_ago(23)), vacuuming(), GARBAGE, work(), False, Reason.NOT_DUE),
        (table(status=vacuumed_ago(0.5)), vacuuming(interval="1h"), GARBAGE, work(), False,
         Reason.NOT_DUE),
        # nothing reclaimable, or less than the policy's threshold
        (table(), vacuuming(), CLEAN, work(), False, Reason.NOTHING_TO_DO),
        (table(), vacuuming(minReclaimableBytes="10M"), GARBAGE, work(), False,
         Reason.NOTHING_TO_DO),
        (table(), vacuuming(minReclaimableBytes="5M"), GARBAGE, work(), True, Reason.TRIGGERED),
        # VACUUM off (the default)
        (table(), compaction(), GARBAGE, work(), False, Reason.DISABLED),
        (table(), vacuuming(enabled=False), GARBAGE, work(), False, Reason.DISABLED),
        # a run of the policy in flight: a compaction vacuums at its end; one VACUUM at a time
        (table(), vacuuming(), GARBAGE,
         work(active=(ActiveRun("opt-1", "optimize"),), active_total=1), False,
         Reason.RUN_IN_PROGRESS),
        (table(), vacuuming(), GARBAGE,
         work(active=(ActiveRun("vac-1", "vacuum"),), active_total=1), False,
         Reason.RUN_IN_PROGRESS),
        # compaction due: its run ends with VACUUM, no second run
        (table(), vacuuming(), replace(HEALTH, reclaimable_bytes=5_000_000), work(), False,
         Reason.NOT_DUE),
        # the rules every run of the policy follows
        (table({"suspend": True}), vacuuming(), GARBAGE, work(), False, Reason.TABLE_SUSPENDED),
        (table(), vacuuming({"suspend": True}), GARBAGE, work(), False, Reason.POLICY_SUSPENDED),
        (table(), vacuuming(), replace(GARBAGE, maintainable=False, unmaintainable_reason="x"),
         work(), False, Reason.UNSUPPORTED_PROTOCOL),
        # VACUUM changes no row: a table OPTIMIZE cannot rewrite is still vacuumed
        (table(), vacuuming(), replace(GARBAGE, writable=False, unwritable_reason="x"), work(),
         True, Reason.TRIGGERED),
        (table(), vacuuming(), GARBAGE, work(active_total=4, max_concurrent_runs=4), False,
         Reason.CONCURRENCY_LIMIT),
        (table(),
         vacuuming({"maintenanceWindows": [{"start": "03:00", "end": "05:00"}]}),
         GARBAGE, work(), False, Reason.OUTSIDE_MAINTENANCE_WINDOW),
        (table(), vacuuming(), GARBAGE,
         work(retries={"vacuum": Retry(1, NOW + timedelta(minutes=5), "run vac-1 failed")}),
         False, Reason.BACKING_OFF),
    ],
    ids=[
        "never-vacuumed",
        "interval-passed",
        "short-interval-passed",
        "inside-interval",
        "inside-short-interval",
        "nothing-reclaimable",
        "below-min-reclaimable",
        "at-min-reclaimable",
        "vacuum-off-by-default",
        "vacuum-disabled",
        "compaction-running",
        "vacuum-running",
        "compaction-due-takes-vacuum",
        "table-suspended",
        "policy-suspended",
        "unmaintainable",
        "not-rewritable-still-vacuumed",
        "concurrency-limit",
        "outside-window",
        "backing-off",
    ],
)  # fmt: skip
def test_vacuum_decisions(
    tbl: TxnTable,
    policy: CompactionPolicy,
    health: TableHealth,
    wrk: Work,
    launch: bool,
    why: Reason,
) -> None:
    comp, decision = vacuum_decision(tbl, policy, health, wrk)
    assert (decision.launch, decision.why) == (launch, why), decision.message
    assert decision.message
    if why is Reason.NOT_DUE and health is not GARBAGE:
        assert comp.launch  # the compaction run takes the VACUUM along
    if launch:
        assert not comp.launch and decision.scheduled_time is not None
        assert decision.trigger == "reclaimable" and "5000000 bytes" in decision.message


DAY_MS = 86_400_000


def removed_days_before_last_vacuum(days: float, last_hours_ago: float = 25) -> TableHealth:
    """Garbage whose newest remove is ``days`` older than the last VACUUM's start (7-day table
    retention)."""
    last = NOW - timedelta(hours=last_hours_ago)
    newest = int(last.timestamp() * 1000 - days * DAY_MS)
    return replace(GARBAGE, file_retention_ms=7 * DAY_MS, newest_removal_ms=newest)


@pytest.mark.parametrize(
    ("health", "vacuum", "launch", "why"),
    [
        # every tombstone was past the 7-day retention when the last VACUUM started: swept
        (removed_days_before_last_vacuum(9), {}, False, Reason.NOTHING_TO_DO),
        # removes younger than the retention then have become reclaimable since
        (removed_days_before_last_vacuum(3), {}, True, Reason.TRIGGERED),
        # stamped half an hour before that VACUUM's cutoff: it was swept (no slack: the VACUUM
        # compared with its own clock, later than the run's start)
        (removed_days_before_last_vacuum(7 + 0.5 / 24), {}, False, Reason.NOTHING_TO_DO),
        # stamped half an hour after it: that VACUUM kept it, it is reclaimable now
        (removed_days_before_last_vacuum(7 - 0.5 / 24), {}, True, Reason.TRIGGERED),
        # the policy keeps 10 days: files removed 9 days before that VACUUM were kept by it
        (removed_days_before_last_vacuum(9), {"retention": "10d"}, True, Reason.TRIGGERED),
        # unknown figures (a broken retention property, a tombstone without a timestamp): due
        (replace(removed_days_before_last_vacuum(9), file_retention_ms=None), {}, True,
         Reason.TRIGGERED),
    ],
    ids=[
        "swept",
        "young-removes-now-reclaimable",
        "swept-just-past-the-cutoff",
        "kept-just-inside-the-cutoff",
        "policy-keeps-longer",
        "unknown-retention",
    ],
)  # fmt: skip
def test_a_table_swept_by_its_last_vacuum_is_not_vacuumed_again(
    health: TableHealth, vacuum: dict[str, Any], launch: bool, why: Reason
) -> None:
    decision = decide_vacuum(table(status=vacuumed_ago(25)), vacuuming(**vacuum), health, work())
    assert (decision.launch, decision.why) == (launch, why), decision.message
    if why is Reason.NOTHING_TO_DO:
        assert "past the retention" in decision.message
    # never vacuumed: nothing says the garbage is gone
    assert decide_vacuum(table(), vacuuming(**vacuum), health, work()).launch


def test_a_vacuum_retry_is_the_next_attempt() -> None:
    retry = Retry(2, NOW - timedelta(minutes=1), "run vac-1 failed")
    decision = decide_vacuum(table(), vacuuming(), GARBAGE, work(retries={"vacuum": retry}))
    assert decision.launch and decision.attempt == 2


def test_a_running_vacuum_holds_the_compaction_under_either_concurrency_policy() -> None:
    running = work(active=(ActiveRun("vac-1", "vacuum"),), active_total=1)
    for concurrency in ("Forbid", "Replace"):
        policy = compaction(concurrencyPolicy=concurrency)
        held = decide_compaction(table(), policy, HEALTH, running)
        assert (held.launch, held.why) == (False, Reason.RUN_IN_PROGRESS)
        assert "vacuum vac-1" in held.message


def test_vacuum_outcomes_and_what_counts_as_vacuumed() -> None:
    deleted = {"vacuumOnly": True, "numFilesRemoved": 0, "numFilesAdded": 0,
               "vacuum": {"numFiles": 3, "numDeleted": 3, "bytes": 10}}  # fmt: skip
    none = {**deleted, "vacuum": {"numFiles": 0, "numDeleted": 0, "bytes": 0}}
    assert outcome_of(deleted, True) == "Succeeded"
    assert outcome_of(none, True) == "NothingToDo"
    assert outcome_of(deleted, False) == "Failed"
    assert vacuumed("vacuum", deleted, True) and vacuumed("vacuum", none, True)
    assert vacuumed("vacuum", None, True)  # exit 0 of a VACUUM-only run: it vacuumed
    assert not vacuumed("vacuum", deleted, False)
    compacted = {"numFilesRemoved": 9, "numFilesAdded": 1}
    assert vacuumed("optimize", {**compacted, "vacuum": {"numFiles": 0}}, True)
    assert not vacuumed("optimize", {**compacted, "vacuum": {"error": "retention"}}, True)
    assert not vacuumed("optimize", compacted, True)  # ran without --vacuum
    assert not vacuumed("optimize", None, True)
    assert vacuumed("optimize", None, True, compaction_vacuums=True)
    assert not vacuumed("checkpoint", None, True, compaction_vacuums=True)


def test_vacuum_settings_defaults_and_bad_values() -> None:
    vac = compaction().spec.vacuum
    assert (vac.enabled, vac.interval, vac.min_reclaimable_bytes) == (False, 86_400, 1)
    assert vacuuming(interval="1h30m", minReclaimableBytes="1Gi").spec.vacuum.interval == 5400
    with pytest.raises(InvalidSpecError, match="interval"):
        vacuuming(interval="daily")
    with pytest.raises(InvalidSpecError, match="minReclaimableBytes"):
        vacuuming(minReclaimableBytes=0)


def _approved(plan_id: str | None) -> TxnTable:
    tbl = table()
    notes = {} if plan_id is None else {"txntable.io/approve-plan": plan_id}
    return replace(tbl, metadata=replace(tbl.metadata, annotations=notes))


@pytest.mark.parametrize(
    ("approval", "plan_id", "schedule", "launch", "words"),
    [
        (None, "aaaaaaaaaaaa", False, False, "txntable.io/approve-plan=aaaaaaaaaaaa"),
        ("bbbbbbbbbbbb", "aaaaaaaaaaaa", False, False, "approved an earlier plan"),
        ("aaaaaaaaaaaa", "aaaaaaaaaaaa", False, True, "small files"),
        ("aaaaaaaaaaaa", None, False, False, "no plan is known yet"),
        (None, "aaaaaaaaaaaa", True, False, "schedule fired"),
        ("aaaaaaaaaaaa", "aaaaaaaaaaaa", True, True, "schedule fired"),
    ],
    ids=["unapproved", "earlier-plan", "approved", "no-plan", "schedule-unapproved", "schedule"],
)
def test_require_approval_holds_a_due_compaction(
    approval: str | None, plan_id: str | None, schedule: bool, launch: bool, words: str
) -> None:
    triggers = {"schedule": "0 2 * * *"} if schedule else {"smallFiles": 10}
    policy = compaction(requireApproval=True, triggers=triggers)
    decision = decide_compaction(_approved(approval), policy, HEALTH, work(plan_id=plan_id))
    assert decision.launch is launch, decision.message
    assert decision.why is (Reason.TRIGGERED if launch else Reason.AWAITING_APPROVAL)
    assert words in decision.message


def test_approval_waits_only_for_a_due_compaction() -> None:
    policy = compaction(requireApproval=True)
    quiet = decide_compaction(_approved(None), policy, replace(HEALTH, small_files=5), work())
    assert quiet.why is Reason.NOT_DUE  # nothing due: nothing to approve


def test_a_conflict_hold_defers_the_compaction_until_it_ends() -> None:
    hold = Hold(NOW + timedelta(minutes=5), "our last 3 compaction run(s) lost 75%")
    held = decide_compaction(table(), compaction(), HEALTH, work(conflicts=hold))
    assert (held.launch, held.why) == (False, Reason.CONFLICT_BACK_OFF)
    assert "lost 75%" in held.message and "not before 2026-11-22T02:35:00" in held.message
    over = Hold(NOW - timedelta(seconds=1), "old")
    assert decide_compaction(table(), compaction(), HEALTH, work(conflicts=over)).launch


# -- issue 23.10: the run limit is checked after due-ness ---------------------------------------
@pytest.mark.parametrize("in_flight", [0, 3, 4, 9])
def test_a_table_with_nothing_due_never_reports_the_run_limit(in_flight: int) -> None:
    """Before: a table with 5 small files (threshold 10) said NotDue with 3 runs in flight and
    ConcurrencyLimit with 4, so every table of the operator flipped (one status write each)
    whenever a run started or ended elsewhere."""
    quiet = replace(HEALTH, small_files=5, compactable_small_files=5)
    limit = work(active_total=in_flight, max_concurrent_runs=4)
    assert decide_compaction(table(), compaction(), quiet, limit).why is Reason.NOT_DUE
    clean = replace(GARBAGE, reclaimable_bytes=0)
    assert decide_vacuum(table(), vacuuming(), clean, limit).why is Reason.NOTHING_TO_DO
    fresh = table(status=vacuumed_ago(2))
    assert decide_vacuum(fresh, vacuuming(), GARBAGE, limit).why is Reason.NOT_DUE


def test_only_a_due_run_waits_for_a_slot_and_its_message_stays_put() -> None:
    full = [work(active_total=n, max_concurrent_runs=4) for n in (4, 5, 7)]
    said = {decide_compaction(table(), compaction(), HEALTH, w) for w in full}
    assert len(said) == 1  # the same decision, whatever the runs in flight: no status write
    (held,) = said
    assert held.why is Reason.CONCURRENCY_LIMIT and not held.launch
    assert "60 small files >= 10" in held.message and "at most 4" in held.message
    vacuum = decide_vacuum(table(), vacuuming(), GARBAGE, full[0])
    assert vacuum.why is Reason.CONCURRENCY_LIMIT and "reclaimable" in vacuum.message
    # a due compaction awaiting approval says so, not the limit (it could not start anyway)
    approval = compaction(requireApproval=True)
    assert decide_compaction(table(), approval, HEALTH, full[0]).why is Reason.AWAITING_APPROVAL


def test_a_schedule_that_never_fires_is_a_decision_not_an_exception() -> None:
    """Issue 23.3: ``0 0 30 2 *`` passes the CRD; evaluating it raised at every tick."""
    never = compaction(triggers={"schedule": "0 0 30 2 *"})
    decision = decide_compaction(table(), never, HEALTH, work())
    assert decision.why is Reason.INVALID_SPEC and not decision.launch
    assert "never fires" in decision.message and "nightly" in decision.message
