"""``GovernedViews``: a namespace's policy ticks share one ``govern`` pass over its tables, and
any change of a table body (a new resourceVersion) or of a policy's selector computes it anew
(issue 30.2: each tick walking every table cost O(tables x policies) per interval)."""

from __future__ import annotations

from typing import Any

from tests.support.decide import NOW, compaction
from tests.support.manifests import table_manifest
from txntable.api.types import TxnTable
from txntable.handlers.governed_views import GovernedViews
from txntable.reconcile.policy_status import governed_status, policy_status


def _body(i: int, tier: str, version: str = "1") -> dict[str, Any]:
    return table_manifest(
        f"t{i}",
        f"s3://b/t{i}",
        namespace="lake",
        metadata={"uid": f"u{i}", "resourceVersion": version, "labels": {"tier": tier}},
    )


class Parses:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, bodies: Any) -> list[TxnTable]:
        self.calls += 1
        return [TxnTable.from_manifest(dict(b)) for b in bodies]


def _policies() -> list[Any]:
    return [
        compaction(f"p-{tier}", tableSelector={"matchLabels": {"tier": tier}})
        for tier in ("gold", "silver", "bronze")
    ] + [compaction("p-any", tableSelector={"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["bronze"]}]})]  # fmt: skip


def test_the_policies_of_a_namespace_share_one_pass_with_the_answer_of_each_alone() -> None:
    views, parse = GovernedViews(), Parses()
    bodies = [_body(i, ("gold", "silver", "bronze")[i % 3]) for i in range(30)]
    policies = _policies()
    tables = [TxnTable.from_manifest(b) for b in bodies]
    for _ in range(3):  # three intervals of every policy's tick
        for policy in policies:
            view = views.governed("lake", "compaction", bodies, policies, parse)
            shared = governed_status(policy, view, NOW)
            alone = policy_status(policy, tables, NOW, policies)
            assert shared.matched_tables == alone.matched_tables
            assert shared.conditions[0].message == alone.conditions[0].message
    assert parse.calls == 1
    assert "10 more it selects" in governed_status(policies[2], view, NOW).conditions[0].message


def test_a_changed_table_or_selector_is_computed_again() -> None:
    views, parse = GovernedViews(), Parses()
    bodies = [_body(i, "gold") for i in range(4)]
    policies = _policies()
    gold = views.governed("lake", "compaction", bodies, policies, parse)
    assert len(gold.matched["p-gold"]) == 4
    bodies[0] = _body(0, "silver", version="2")  # relabelled: a new resourceVersion
    relabelled = views.governed("lake", "compaction", bodies, policies, parse)
    assert [t.metadata.name for t in relabelled.matched["p-silver"]] == ["t0"]
    edited = [compaction("p-gold", tableSelector={"matchLabels": {"tier": "silver"}})]
    moved = views.governed("lake", "compaction", bodies, edited, parse)
    assert [t.metadata.name for t in moved.matched["p-gold"]] == ["t0"]
    assert parse.calls == 3
    views.governed("lake", "checkpoint", bodies, [], parse)  # another kind: a view of its own
    assert parse.calls == 4


def test_a_namespace_without_tables_keeps_no_view() -> None:
    views, parse = GovernedViews(), Parses()
    views.governed("lake", "compaction", [_body(1, "gold")], _policies(), parse)
    assert views.governed("lake", "compaction", [], _policies(), parse).matched == {}
    assert views.governed("lake", "compaction", None, _policies(), parse).matched == {}
    assert not views._views
