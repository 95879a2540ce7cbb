"""Every decision of the controller, table-driven: a resource, a policy, an observed table and
the work in flight go in; whether to start a run, and why not, comes out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from txntable.api.types import CheckpointPolicy, CompactionPolicy, RunRecord, TxnTable
from txntable.reconcile.decide import (
    ActiveRun,
    Placement,
    Why,
    Work,
    decide_checkpoint,
    decide_compaction,
    outcome_of,
)
from txntable.reconcile.health import TableHealth
from txntable.reconcile.resolve import resolve

NOW = datetime(2026, 11, 22, 2, 30, tzinfo=UTC)  # a Sunday


def table(
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> TxnTable:
    return TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": "events", "namespace": "default", "labels": labels or {}},
            "spec": {"location": "s3://b/events", **(spec or {})},
            "status": status or {},
        }
    )


def compaction(name: str = "nightly", **spec: Any) -> CompactionPolicy:
    base: dict[str, Any] = {"triggers": {"smallFiles": 10}}
    base.update(spec)
    return CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": name, "namespace": "default"},
            "spec": base,
        }
    )


def checkpoint_policy(name: str = "ckpt", **spec: Any) -> CheckpointPolicy:
    return CheckpointPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CheckpointPolicy",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
    )


HEALTH = TableHealth(
    version=40,
    min_reader_version=1,
    min_writer_version=2,
    reader_features=(),
    writer_features=(),
    files=100,
    size_bytes=100 * 1024,
    small_files=60,
    small_file_bytes=60 * 1024,
    compactable_small_files=60,
    partitions=3,
    last_commit_time=NOW - timedelta(minutes=1),
    checkpoint_version=30,
    checkpoint_time=NOW - timedelta(hours=2),
    commits_since_checkpoint=10,
    writable=True,
)


def work(**kw: Any) -> Work:
    return Work(now=kw.pop("now", NOW), **kw)


def last_run(minutes_ago: int, version: int = 35) -> dict[str, Any]:
    t = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "lastCompaction": {
            "runName": "r1",
            "outcome": "Succeeded",
            "startTime": t,
            "completionTime": t,
            "version": version,
        }
    }


@pytest.mark.parametrize(
    ("tbl", "policy", "health", "wrk", "launch", "why"),
    [
        (table(), compaction(), HEALTH, work(), True, Why.TRIGGERED),
        (table({"suspend": True}), compaction(), HEALTH, work(), False, Why.TABLE_SUSPENDED),
        (table(), compaction(suspend=True), HEALTH, work(), False, Why.POLICY_SUSPENDED),
        (
            table(),
            compaction(),
            replace(HEALTH, writable=False, unwritable_reason="columnMapping"),
            work(),
            False,
            Why.NOT_WRITABLE,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active=(ActiveRun("r0", "optimize"),), active_total=1),
            False,
            Why.RUN_IN_PROGRESS,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active=(ActiveRun("c0", "checkpoint"),), active_total=1),
            True,
            Why.TRIGGERED,
        ),
        (
            table(),
            compaction(),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            False,
            Why.CONCURRENCY_LIMIT,
        ),
        (
            table(),
            compaction(),
            replace(HEALTH, small_files=3, compactable_small_files=1),
            work(),
            False,
            Why.NOTHING_TO_DO,
        ),
        (table(), compaction(), replace(HEALTH, small_files=5), work(), False, Why.NOT_DUE),
        (
            table(),
            compaction(maintenanceWindows=[{"start": "22:00", "end": "02:00"}]),
            HEALTH,
            work(),
            False,
            Why.OUTSIDE_WINDOW,
        ),
        (
            table(),
            compaction(maintenanceWindows=[{"start": "02:00", "end": "04:00"}]),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),
        (
            table(),
            compaction(
                maintenanceWindows=[{"start": "03:00", "end": "04:00"}], timeZone="Europe/Berlin"
            ),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),
        (table(status=last_run(5)), compaction(), HEALTH, work(), False, Why.COOLDOWN),
        (table(status=last_run(20)), compaction(), HEALTH, work(), True, Why.TRIGGERED),
        (
            table(),
            compaction(triggers={"commitsSinceLastRun": 41}),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),
        (
            table(status=last_run(60, version=35)),
            compaction(triggers={"commitsSinceLastRun": 6}),
            HEALTH,
            work(),
            False,
            Why.NOT_DUE,
        ),
        (
            table(),
            compaction(triggers={"smallFilePercent": 50}),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),
        (
            table(),
            compaction(triggers={"smallFilePercent": 70}),
            HEALTH,
            work(),
            False,
            Why.NOT_DUE,
        ),
        (
            table(),
            compaction(triggers={"schedule": "0 2 * * *"}),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),
        (
            table(),
            compaction(triggers={"schedule": "0 1 * * *"}),
            HEALTH,
            work(),
            False,
            Why.NOT_DUE,
        ),  # fired 90 minutes ago: past the starting deadline, no previous run
        (
            table(status=last_run(60 * 25)),
            compaction(triggers={"schedule": "0 1 * * *"}),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
        ),  # missed since the last run: catch up once
    ],
)
def test_compaction_decisions(
    tbl: TxnTable, policy: CompactionPolicy, health: TableHealth, wrk: Work, launch: bool, why: Why
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
            Why.TRIGGERED,
            Placement.INLINE,
        ),
        (checkpoint_policy(commitInterval=11), HEALTH, work(), False, Why.NOT_DUE, None),
        (
            checkpoint_policy(commitInterval=10, mode="Spark"),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
            Placement.SPARK,
        ),
        (
            checkpoint_policy(commitInterval=10, inlineMaxActions=50),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
            Placement.SPARK,
        ),
        (
            checkpoint_policy(commitInterval=10, mode="Spark"),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            False,
            Why.CONCURRENCY_LIMIT,
            None,
        ),
        (
            checkpoint_policy(commitInterval=10),
            HEALTH,
            work(active_total=4, max_concurrent_runs=4),
            True,
            Why.TRIGGERED,
            Placement.INLINE,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="1h"),
            HEALTH,
            work(),
            True,
            Why.TRIGGERED,
            Placement.INLINE,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="3h"),
            HEALTH,
            work(),
            False,
            Why.NOT_DUE,
            None,
        ),
        (
            checkpoint_policy(commitInterval=100, maxAge="1h"),
            replace(HEALTH, commits_since_checkpoint=0),
            work(),
            False,
            Why.NOT_DUE,
            None,
        ),
        (checkpoint_policy(suspend=True), HEALTH, work(), False, Why.POLICY_SUSPENDED, None),
        (
            checkpoint_policy(),
            HEALTH,
            work(active=(ActiveRun("c", "checkpoint"),)),
            False,
            Why.RUN_IN_PROGRESS,
            None,
        ),
        (
            checkpoint_policy(),
            replace(HEALTH, writable=False, unwritable_reason="x"),
            work(),
            False,
            Why.NOT_WRITABLE,
            None,
        ),
    ],
)
def test_checkpoint_decisions(
    policy: CheckpointPolicy,
    health: TableHealth,
    wrk: Work,
    launch: bool,
    why: Why,
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
