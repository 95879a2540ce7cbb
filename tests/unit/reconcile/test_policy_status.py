"""Policy status: matched tables, runs in flight, last run and next schedule."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.unit.reconcile.test_decide import NOW, checkpoint_policy, compaction, last_run, table
from txntable.reconcile.policy_status import policy_status


def test_matched_tables_follow_selectors_and_explicit_references() -> None:
    policy = compaction(
        "gold", tableSelector={"matchLabels": {"tier": "gold"}}, triggers={"schedule": "0 2 * * *"}
    )
    selected = table(labels={"tier": "gold"}, status=last_run(30))
    elsewhere = table({"compactionPolicyRef": {"name": "other"}}, labels={"tier": "gold"})
    st = policy_status(policy, [selected, elsewhere], NOW)
    assert st.matched_tables == ("events",) and st.matched_table_count == 1
    assert st.phase == "Active"
    assert st.last_run is not None and st.last_run.run_name == "r1"
    assert st.next_schedule_time == datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


def test_running_runs_are_active_and_suspension_shows() -> None:
    running = table(
        {"checkpointPolicyRef": {"name": "ckpt"}},
        status={
            "lastCheckpoint": {
                "runName": "c1",
                "outcome": "Running",
                "startTime": "2026-11-22T02:00:00Z",
            }
        },
    )
    st = policy_status(checkpoint_policy(suspend=True), [running], NOW)
    assert [r.run_name for r in st.active_runs] == ["c1"]
    assert st.phase == "Suspended"
    ready = {c.type: c for c in st.conditions}["Ready"]
    assert ready.status == "False" and ready.reason == "Suspended"


def test_a_running_vacuum_only_run_is_active_but_no_schedule() -> None:
    vacuum = {"runName": "vac-1", "outcome": "Running", "startTime": "2026-11-22T02:00:00Z"}
    refs = {"compactionPolicyRef": {"name": "nightly"}, "checkpointPolicyRef": {"name": "ckpt"}}
    running = table(refs, status={**last_run(30), "lastVacuum": vacuum})
    st = policy_status(compaction(), [running], NOW)
    assert [r.run_name for r in st.active_runs] == ["vac-1"]
    assert st.last_run is not None and st.last_run.run_name == "r1"  # the compaction's
    assert policy_status(checkpoint_policy(), [running], NOW).active_runs == ()
