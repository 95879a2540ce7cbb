"""Builders of the decision tests: a TxnTable, its policies, an observed table and its work."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.reconcile.decide import Work
from txntable.reconcile.health import TableHealth

NOW = datetime(2026, 11, 22, 2, 30, tzinfo=UTC)  # a Sunday


def table(
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> TxnTable:
    return TxnTable.from_manifest(
        table_manifest(
            "events",
            "s3://b/events",
            metadata={"labels": labels or {}},
            status=status or {},
            **(spec or {}),
        )
    )


def compaction(name: str = "nightly", **spec: Any) -> CompactionPolicy:
    base: dict[str, Any] = {"triggers": {"smallFiles": 10}}
    base.update(spec)
    return CompactionPolicy.from_manifest(compaction_policy_manifest(name, **base))


def checkpoint_policy(name: str = "ckpt", **spec: Any) -> CheckpointPolicy:
    return CheckpointPolicy.from_manifest(checkpoint_policy_manifest(name, **spec))


HEALTH = TableHealth(
    version=40,
    min_reader_version=1,
    min_writer_version=2,
    reader_features=(),
    writer_features=(),
    files=100,
    size_bytes=100 * 1024,
    small_files=60,
    small_file_bytes=60 * 1024,
    compactable_small_files=60,
    partitions=3,
    last_commit_time=NOW - timedelta(minutes=1),
    checkpoint_version=30,
    checkpoint_time=NOW - timedelta(hours=2),
    commits_since_checkpoint=10,
    writable=True,
)


def work(**kw: Any) -> Work:
    return Work(now=kw.pop("now", NOW), **kw)


def last_run(minutes_ago: int, version: int = 35) -> dict[str, Any]:
    t = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "lastCompaction": {
            "runName": "r1",
            "outcome": "Succeeded",
            "startTime": t,
            "completionTime": t,
            "version": version,
        }
    }
