"""``govern``: who governs what among a namespace's tables in one pass gives ``resolve``'s
answer for every table, whatever the order of the policies, and the policy statuses built from
it match and contest what table-by-table resolution would (issue 30.2: a namespace's policy
ticks share one pass instead of each walking every table)."""

from __future__ import annotations

import random
from typing import Any

from tests.support.decide import NOW, compaction
from tests.support.manifests import table_manifest
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.reconcile.policy_status import govern, policy_status
from txntable.reconcile.resolve import resolve

TIERS = ("gold", "silver", "bronze", None)


def _table(i: int, tier: str | None, ref: str | None) -> TxnTable:
    spec: dict[str, Any] = {"location": f"s3://b/t{i}"}
    if ref:
        spec["compactionPolicyRef"] = {"name": ref}
    return TxnTable.from_manifest(
        table_manifest(
            f"t{i}",
            metadata={"labels": {"tier": tier, "n": str(i % 3)} if tier else {"n": str(i % 3)}},
            **spec,
        )
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


def test_the_choice_is_resolves_for_every_table_and_order() -> None:
    rng = random.Random(30)
    for _ in range(200):
        policies = _policies(rng)
        names = [p.metadata.name for p in policies]
        tables = [
            _table(i, rng.choice(TIERS), rng.choice([None, None, *names, "gone"]))
            for i in range(30)
        ]
        shuffled = rng.sample(policies, len(policies))
        governed = govern(tables, shuffled, "compaction")
        chosen_by = {t.metadata.name: name for name, ts in governed.matched.items() for t in ts}
        for t in tables:
            chosen = resolve(t, policies, "compaction").policy
            assert chosen_by.get(t.metadata.name) == (chosen.metadata.name if chosen else None), t


def test_an_edited_selector_or_label_changes_the_choice() -> None:
    gold = _table(1, "gold", None)
    before = [compaction("p", tableSelector={"matchLabels": {"tier": "gold"}})]
    assert [t.metadata.name for t in govern([gold], before, "compaction").matched["p"]] == ["t1"]
    after = [compaction("p", tableSelector={"matchLabels": {"tier": "silver"}})]
    assert govern([gold], after, "compaction").matched == {}
    relabelled = _table(1, "silver", None)
    assert "p" in govern([relabelled], after, "compaction").matched


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
