"""A CompactionPolicy from a spec, and the optimize job's arguments the controller builds for it:
what the tests of the settings' way from policy to job share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from txntable.api.conditions import Reason
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.handlers.requests import compaction_request
from txntable.reconcile.decide import Decision


def compaction_policy(spec: dict[str, Any]) -> CompactionPolicy:
    """A CompactionPolicy ``p`` with ``spec`` (a trigger added when it has none)."""
    return CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"triggers": {"smallFiles": 2}, **spec},
        }
    )


def compaction_args(policy: CompactionPolicy, location: str = "s3://bucket/t") -> tuple[str, ...]:
    """The job's arguments for the TxnTable at ``location`` under ``policy``, as the controller
    builds them (``--master`` included: the launcher's part)."""
    table = TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u-1"},
            "spec": {"location": location},
        }
    )
    decision = Decision(True, Reason.TRIGGERED, "go", scheduled_time=datetime.now(UTC))
    return compaction_request(table, policy, decision, Config.from_env({})).args
