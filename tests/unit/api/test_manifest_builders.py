"""The test suite's manifest builders (``tests/support/manifests.py``) make manifests our own
parsers accept, with the envelope the CRDs name and the overrides where the test put them."""

from __future__ import annotations

from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable


def test_each_builder_makes_a_manifest_its_kind_parses() -> None:
    table = TxnTable.from_manifest(
        table_manifest(
            "t",
            "/data/t",
            namespace="lake",
            metadata={"uid": "u-1", "labels": {"tier": "gold"}},
            compactionPolicyRef={"name": "compact"},
        )
    )
    assert (table.metadata.name, table.metadata.namespace, table.metadata.uid) == (
        "t",
        "lake",
        "u-1",
    )
    assert table.metadata.labels == {"tier": "gold"}
    assert table.spec.location == "/data/t"
    assert table.spec.compaction_policy_ref is not None
    assert table.spec.compaction_policy_ref.name == "compact"
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest(triggers={"smallFiles": 4, "cooldown": "1s"})
    )
    assert policy.metadata.name == "compact" and policy.spec.triggers.small_files == 4
    checkpoint = CheckpointPolicy.from_manifest(checkpoint_policy_manifest("every"))
    assert checkpoint.metadata.name == "every"


def test_each_call_returns_a_new_manifest_and_no_namespace_when_asked() -> None:
    first, second = table_manifest(), table_manifest()
    first["spec"]["location"] = "/elsewhere"
    assert second["spec"]["location"] == "/nowhere"
    assert "namespace" not in compaction_policy_manifest(namespace=None)["metadata"]
