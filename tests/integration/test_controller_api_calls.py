"""API calls of the Kopf controller at rest, counted by kmock: bounded per namespace, not per table.

Twelve idle TxnTables in two namespaces (each table with a storage Secret and policies that have
nothing to do) are reconciled many times. Whatever the number of ticks, the runs are listed once
per namespace per observe interval (``launch.run_cache``) instead of once per table per tick,
each Secret is read once (``handlers.secret_cache``: again only after its maximum age), and a
table's status is patched only when it changes: a few times at the start, never at every tick.
Counts of requests only, against the number of reconciles the controller reports in /metrics;
no timing.
"""

from __future__ import annotations

import asyncio
import collections
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kopf.testing import KopfRunner

from tests.support.kmock_controller import (
    CHECKPOINT,
    COMPACTION,
    TABLES,
    metrics_text,
    register_resources,
    use_kmock,
)
from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)
from txntable.engine import Table

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

NAMESPACES = ("team-a", "team-b")
PER_NAMESPACE = 6
#: reconciles of every table before the requests are counted
TICKS = 8


def _template(path: Path) -> None:
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["x", "y"]})
    table = Table.create(str(path), data.schema, partition_by=["p"])
    table.append(data)


def _apply(kmock: Any, tmp_path: Path) -> list[tuple[str, str]]:
    kmock.resources["v1/secrets"] = {"kind": "Secret", "namespaced": True, "verbs": ["get"]}
    _template(tmp_path / "template")
    tables = []
    for ns in NAMESPACES:
        meta = {"resourceVersion": "1"}
        kmock.objects[COMPACTION, ns, "compact"] = compaction_policy_manifest(
            "compact",
            namespace=ns,
            metadata=meta,
            triggers={"smallFiles": 10_000},
            spark={"backend": "SparkApplication"},
        )
        kmock.objects[CHECKPOINT, ns, "ckpt"] = checkpoint_policy_manifest(
            "ckpt", namespace=ns, metadata=meta, commitInterval=1000, mode="Inline"
        )
        kmock.objects["v1/secrets", ns, "storage"] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "storage", "namespace": ns, **meta},
            "data": {"aws_region": "ZXUtd2VzdC0x"},  # harmless for a local table
        }
        for i in range(PER_NAMESPACE):
            name = f"t{i}"
            location = tmp_path / ns / name
            shutil.copytree(tmp_path / "template", location)
            kmock.objects[TABLES, ns, name] = table_manifest(
                name,
                location,
                namespace=ns,
                metadata={"uid": f"uid-{ns}-{name}", "generation": 1, **meta},
                observeInterval="1s",
                compactionPolicyRef={"name": "compact"},
                checkpointPolicyRef={"name": "ckpt"},
                storage={"secretRef": {"name": "storage"}},
            )
            tables.append((ns, name))
    return tables


def _reconciles(text: str) -> tuple[float, float]:
    """(ok, error) table reconciles so far, from the controller's /metrics."""
    counts = {"ok": 0.0, "error": 0.0}
    pattern = r'^txntable_reconciles_total\{kind="table",outcome="(\w+)"\} (\S+)$'
    for outcome, value in re.findall(pattern, text, re.MULTILINE):
        counts[outcome] = counts.get(outcome, 0.0) + float(value)
    return counts["ok"], counts["error"]


FINAL = "/metadata/finalizers"


def _metadata_written(patch: Any) -> list[str]:
    """The metadata paths a patch writes: a JSON patch's operations (Kopf's finalizer, after
    its resourceVersion test) or a merge patch's metadata keys."""
    if isinstance(patch, list):
        return sorted(op["path"] for op in patch if op.get("op") != "test")
    if isinstance(patch, dict):
        return sorted(f"/metadata/{key}" for key in patch.get("metadata") or {})
    return []


async def test_idle_tables_cost_requests_per_namespace_not_per_table(
    kmock: Any, tmp_path: Path
) -> None:
    register_resources(kmock)
    tables = _apply(kmock, tmp_path)
    use_kmock(kmock)
    seen: dict[str, Any] = {}

    def run() -> bool:
        args = ["run", "-A", "--standalone", "-m", "txntable.handlers.kopf_handlers"]
        with KopfRunner(args, timeout=60):
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                try:
                    ok, errors = _reconciles(metrics_text())
                except OSError:  # /metrics not served yet
                    ok, errors = 0.0, 0.0
                if ok >= TICKS * len(tables):
                    seen["requests"] = list(kmock)  # right after the count, before stopping
                    seen["ok"], seen["errors"] = ok, errors
                    return True
                time.sleep(0.5)
        return False

    assert await asyncio.get_running_loop().run_in_executor(None, run)
    reconciles = seen["ok"]
    assert seen["errors"] == 0
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    status_patches: collections.Counter[tuple[str | None, str | None]] = collections.Counter()
    metadata_patches: dict[tuple[str, str | None, str | None], list[Any]] = collections.defaultdict(
        list
    )
    for request in seen["requests"]:
        if request.resource is None:
            continue
        action = str(getattr(request.action, "value", request.action)).lower()
        calls[action, request.resource.plural] += 1
        is_patch = str(getattr(request.method, "value", request.method)).upper() == "PATCH"
        body = request.data if isinstance(request.data, dict) else {}
        if is_patch and request.resource.plural == "txntables" and "status" in body:
            status_patches[request.namespace, request.name] += 1
        written = _metadata_written(request.data) if is_patch else []
        if written:
            key = (request.resource.plural, request.namespace, request.name)
            metadata_patches[key].append(written)
    # Runs: listed per namespace per interval, whatever the number of tables (6 per namespace);
    # one listing per table per tick would make lists == reconciles.
    lists = calls["list", "sparkapplications"]
    assert 1 <= lists <= reconciles / 3, (lists, reconciles)
    assert calls["fetch", "sparkapplications"] == 0
    # Secrets: each read once (the maximum age is minutes), not once per tick.
    assert calls["fetch", "secrets"] == len(NAMESPACES), calls
    # Status: written when it changes (the first ticks), not at each of the >= 8 ticks.
    assert set(status_patches) == set(tables), status_patches
    assert max(status_patches.values()) <= 3, status_patches
    # Kopf's own writes to the objects: the finalizer its daemons and timers need, and no
    # bookkeeping (no handler progress, no copy of the spec in an annotation). kmock sends no
    # watch event for a JSON patch, so Kopf adds the finalizer again after its consistency
    # timeout: how many times is the real API server's to say (bench/scale_apiserver.py).
    assert {(ns, name) for plural, ns, name in metadata_patches if plural == "txntables"} == set(
        tables
    )
    others = {k: v for k, v in metadata_patches.items() if {p for w in v for p in w} != {FINAL}}
    assert others == {}
