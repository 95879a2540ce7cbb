"""The TxnTable and the VACUUM-only CompactionPolicy (tidy) of the controller's VACUUM tests."""

from __future__ import annotations

from pathlib import Path

from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.types import CompactionPolicy, TxnTable


def resources(location: Path) -> tuple[TxnTable, CompactionPolicy]:
    table = TxnTable.from_manifest(
        table_manifest(
            "events", location, metadata={"uid": "uid-vac"}, compactionPolicyRef={"name": "tidy"}
        )
    )
    policy = CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "tidy",
            minFileSize="1",  # no file is small: compaction never starts
            triggers={"smallFiles": 2, "cooldown": "1s"},
            vacuum={"enabled": True, "interval": "24h"},
            spark={"backend": "Local", "executor": {"instances": 1, "cores": 1}},
        )
    )
    return table, policy
