"""Policy status: matched tables, runs in flight, last run and next schedule."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from tests.support.decide import NOW, checkpoint_policy, compaction, last_run, table
from txntable.api.conditions import Reason
from txntable.reconcile.policy_status import policy_status
from txntable.reconcile.resolve import resolve


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


def test_two_policies_selecting_one_table_list_it_on_neither() -> None:
    """Issue 23.11: a table two policies select follows neither (``resolve`` reports a
    PolicyConflict on it); before, both policies listed it as matched. The winner rule is kept:
    a table that names a policy follows that one, and that one lists it."""
    gold = compaction("gold", tableSelector={"matchLabels": {"tier": "gold"}})
    hot = compaction("hot", tableSelector={"matchLabels": {"hot": "yes"}})
    both = table(labels={"tier": "gold", "hot": "yes"})
    named = table({"compactionPolicyRef": {"name": "hot"}}, labels={"tier": "gold", "hot": "yes"})
    named = replace(named, metadata=replace(named.metadata, name="named"))
    only_gold = table(labels={"tier": "gold"})
    only_gold = replace(only_gold, metadata=replace(only_gold.metadata, name="gold-only"))
    tables = [both, named, only_gold]
    st_gold = policy_status(gold, tables, NOW, [gold, hot])
    st_hot = policy_status(hot, tables, NOW, [gold, hot])
    assert st_gold.matched_tables == ("gold-only",)
    assert st_hot.matched_tables == ("named",)
    message = {c.type: c for c in st_gold.conditions}["Ready"].message
    assert "1 more it selects are selected by another compaction policy too" in message
    # what the tables themselves resolve to agrees
    assert resolve(both, [gold, hot], "compaction").reason is Reason.POLICY_CONFLICT
    assert resolve(named, [gold, hot], "compaction").policy is hot


def test_a_schedule_that_never_fires_makes_the_policy_invalid() -> None:
    """Issue 23.3: ``0 0 30 2 *`` passes the CRD's pattern; before, the status timer raised at
    every interval and the policy's status said nothing."""
    st = policy_status(compaction(triggers={"schedule": "0 0 30 2 *"}), [table()], NOW)
    assert st.phase == "Invalid" and st.next_schedule_time is None
    ready = {c.type: c for c in st.conditions}["Ready"]
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert "never fires" in ready.message


def test_a_fixed_spec_is_said_valid_again() -> None:
    from txntable.reconcile.status import invalid_spec_status

    invalid = invalid_spec_status(1, "spec.triggers: at least one", NOW)
    base = compaction()
    fixed = replace(base, status=replace(base.status, **_parsed(invalid)))
    said = {
        str(c.type): (str(c.status), str(c.reason))
        for c in policy_status(fixed, [], NOW).conditions
    }
    assert said["SpecValid"] == ("True", "SpecAccepted") and said["Ready"][0] == "True"
    untouched = policy_status(compaction(), [], NOW).conditions
    assert "SpecValid" not in {str(c.type) for c in untouched}
    # a schedule that never fires is the spec's fault: SpecValid is not said True then
    never = compaction(triggers={"schedule": "0 0 30 2 *"})
    never = replace(never, status=replace(never.status, **_parsed(invalid)))
    said = {str(c.type): str(c.status) for c in policy_status(never, [], NOW).conditions}
    assert said == {"SpecValid": "False", "Ready": "False"}


def _parsed(status: dict[str, object]) -> dict[str, object]:
    from txntable.api.common import PolicyStatus

    read = PolicyStatus.from_dict(status)
    return {"conditions": read.conditions, "phase": read.phase}
