"""``GoverningPolicies``: the policy each table resolves to, remembered per set of policies,
gives ``resolve``'s answer for every table, whatever the order of the policies, and a new
answer as soon as a policy's selector or a table's labels or reference change (issue 30.2:
it makes a policy's status tick O(tables) instead of O(tables x policies))."""

from __future__ import annotations

import random
from typing import Any

from tests.unit.reconcile.test_decide import NOW, compaction
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.reconcile.policy_status import policy_status
from txntable.reconcile.resolve import GoverningPolicies, resolve

TIERS = ("gold", "silver", "bronze", None)


def _table(i: int, tier: str | None, ref: str | None) -> TxnTable:
    spec: dict[str, Any] = {"location": f"s3://b/t{i}"}
    if ref:
        spec["compactionPolicyRef"] = {"name": ref}
    return TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {
                "name": f"t{i}",
                "namespace": "default",
                "labels": {"tier": tier, "n": str(i % 3)} if tier else {"n": str(i % 3)},
            },
            "spec": spec,
        }
    )


def _policies(rng: random.Random) -> list[CompactionPolicy]:
    out = []
    for k in range(rng.randint(1, 6)):
        tier = rng.choice(TIERS)
        if tier is None:
            selector: dict[str, Any] = {
                "matchExpressions": [{"key": "n", "operator": "In", "values": [str(k % 3)]}]
            }
        else:
            selector = {"matchLabels": {"tier": tier}}
        out.append(compaction(f"p{k}", tableSelector=selector))
    return out


def test_the_remembered_choice_is_resolves_for_every_table_and_order() -> None:
    rng = random.Random(30)
    governing = GoverningPolicies(capacity=4)  # small: sets are evicted during the run
    for _ in range(200):
        policies = _policies(rng)
        names = [p.metadata.name for p in policies]
        tables = [
            _table(i, rng.choice(TIERS), rng.choice([None, None, *names, "gone"]))
            for i in range(30)
        ]
        shuffled = rng.sample(policies, len(policies))
        name_of = governing.governing(shuffled, "compaction")
        for t in tables:
            chosen = resolve(t, policies, "compaction").policy
            assert name_of(t) == (chosen.metadata.name if chosen else None), t


def test_an_edited_selector_is_a_new_set_of_policies() -> None:
    governing = GoverningPolicies()
    gold = _table(1, "gold", None)
    before = [compaction("p", tableSelector={"matchLabels": {"tier": "gold"}})]
    assert governing.governing(before, "compaction")(gold) == "p"
    after = [compaction("p", tableSelector={"matchLabels": {"tier": "silver"}})]
    assert governing.governing(after, "compaction")(gold) is None
    relabelled = _table(1, "silver", None)
    assert governing.governing(after, "compaction")(relabelled) == "p"


def test_policy_status_matches_and_contests_as_before() -> None:
    """The status's matched list and its count of contested tables equal those computed
    table by table with ``resolve`` (main's way), for policies that overlap."""
    rng = random.Random(7)
    for _ in range(50):
        policies = _policies(rng)
        names = [p.metadata.name for p in policies]
        tables = [_table(i, rng.choice(TIERS), rng.choice([None, None, *names])) for i in range(40)]
        for policy in policies:
            st = policy_status(policy, tables, NOW, policies)
            want = sorted(
                t.metadata.name
                for t in tables
                if resolve(t, policies, "compaction").policy is policy
            )
            assert list(st.matched_tables) == want
            alone = [t for t in tables if resolve(t, [policy], "compaction").policy is policy]
            contested = len([t for t in alone if t.metadata.name not in want])
            assert st.matched_table_count == len(want)
            if contested:
                assert f"{contested} more it selects" in st.conditions[0].message
