"""A CompactionPolicy from a spec, and the optimize job's arguments the controller builds for it:
what the tests of the settings' way from policy to job share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.conditions import Reason
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.requests import compaction_request
from txntable.reconcile.decide import Decision


def compaction_policy(spec: dict[str, Any]) -> CompactionPolicy:
    """A CompactionPolicy ``p`` with ``spec`` (a trigger added when it has none)."""
    return CompactionPolicy.from_manifest(
        compaction_policy_manifest("p", namespace="ns", **{"triggers": {"smallFiles": 2}, **spec})
    )


def compaction_args(policy: CompactionPolicy, location: str = "s3://bucket/t") -> tuple[str, ...]:
    """The job's arguments for the TxnTable at ``location`` under ``policy``, as the controller
    builds them (``--master`` included: the launcher's part)."""
    table = TxnTable.from_manifest(
        table_manifest("t", location, namespace="ns", metadata={"uid": "u-1"})
    )
    decision = Decision(True, Reason.TRIGGERED, "go", scheduled_time=datetime.now(UTC))
    return compaction_request(table, policy, decision, Config.from_env({})).args
