"""The TxnTable and the VACUUM-only CompactionPolicy (tidy) of the controller's VACUUM tests."""

from __future__ import annotations

from pathlib import Path

from txntable.api.types import CompactionPolicy, TxnTable


def resources(location: Path) -> tuple[TxnTable, CompactionPolicy]:
    table = TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": "events", "namespace": "default", "uid": "uid-vac"},
            "spec": {"location": str(location), "compactionPolicyRef": {"name": "tidy"}},
        }
    )
    policy = CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": "tidy", "namespace": "default"},
            "spec": {
                "minFileSize": "1",  # no file is small: compaction never starts
                "triggers": {"smallFiles": 2, "cooldown": "1s"},
                "vacuum": {"enabled": True, "interval": "24h"},
                "spark": {"backend": "Local", "executor": {"instances": 1, "cores": 1}},
            },
        }
    )
    return table, policy
