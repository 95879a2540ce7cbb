"""Local mode shows policies' statuses too (issue 32.4): after each round every policy is judged
from its namespace's tables through the controller's policy driver, into the store the tables'
statuses live in, and printed when it changes (``--json``: a ``policyStatus`` line, which a
reader of the tables' ``status`` lines never takes for one); a policy gone from the manifests
is forgotten, as the controller forgets a deleted one. Before, local mode had no policy status."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from txntable.api.types import PolicyStatus, TxnTable
from txntable.cli.local_manifests import Manifests, load_manifests
from txntable.cli.main import main
from txntable.cli.run_cmd import reconcile_loop
from txntable.controller.memory import TableMemories
from txntable.engine import Table
from txntable.handlers.policy_driver import PolicyDriven

MANIFESTS = """
apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: events, namespace: a}}
spec: {{location: {root}/events, compactionPolicyRef: {{name: compact}}}}
---
apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: clicks, namespace: a}}
spec: {{location: {root}/clicks, compactionPolicyRef: {{name: compact}}}}
---
apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: events, namespace: b}}
spec: {{location: {root}/b-events}}
---
apiVersion: txntable.io/v1alpha1
kind: CompactionPolicy
metadata: {{name: compact, namespace: a}}
spec: {{triggers: {{smallFiles: 1000}}}}
---
apiVersion: txntable.io/v1alpha1
kind: CheckpointPolicy
metadata: {{name: events, namespace: b}}
spec: {{tableSelector: {{}}, commitInterval: 1000}}
"""
#: the keys of the policies in the memory (no uid in local mode: kind, namespace and name)
COMPACT, CHECKPOINT = "compaction-policy:a/compact", "checkpoint-policy:b/events"


class _Ticks:
    """An operator whose tick returns the table as it is (no storage is read)."""

    def __init__(self) -> None:
        self.memories = TableMemories()
        self.metrics = None

    def reconcile(self, table: TxnTable, *_: Any, **__: Any) -> Any:
        return SimpleNamespace(status=table.status, launched=(), active_runs=0, events=())


def _manifests(root: Path) -> Manifests:
    (root / "all.yaml").write_text(MANIFESTS.format(root=root))
    manifests = load_manifests(root / "all.yaml")
    assert not manifests.errors
    return manifests


def test_each_policy_reports_the_tables_of_its_namespace(tmp_path: Path) -> None:
    seen: dict[str, PolicyStatus] = {}

    def on_policy(policy: Any, status: PolicyStatus) -> None:
        seen[f"{type(policy).__name__}/{policy.metadata.namespaced_name}"] = status

    operator = _Ticks()
    reconcile_loop(_manifests(tmp_path), operator, once=True, interval=0, on_policy=on_policy)  # type: ignore[arg-type]
    compact, checkpoint = seen["CompactionPolicy/a/compact"], seen["CheckpointPolicy/b/events"]
    assert sorted(compact.matched_tables) == ["clicks", "events"]
    assert list(checkpoint.matched_tables) == ["events"]  # b's table; not a's two
    assert str(compact.phase) == "Active" and compact.matched_table_count == 2
    # a policy named like a table of its namespace keeps a memory of its own
    assert operator.memories.peek(CHECKPOINT, PolicyDriven) is not None


def test_a_policy_gone_from_the_manifests_is_forgotten(tmp_path: Path) -> None:
    manifests = _manifests(tmp_path)
    without = Manifests(manifests.tables, [], manifests.checkpoint, [])
    reloads = iter([None, without])
    operator = _Ticks()
    kept: list[bool] = []

    def on_policy(policy: Any, _status: PolicyStatus) -> None:
        kept.append(operator.memories.peek(COMPACT, PolicyDriven) is not None)

    reconcile_loop(
        manifests,
        operator,  # type: ignore[arg-type]
        once=False,
        interval=0,
        max_ticks=3,
        reload=lambda: next(reloads, None),
        on_policy=on_policy,
    )
    assert kept and kept[0]  # it was remembered while it was in the manifests
    assert COMPACT not in operator.memories and CHECKPOINT in operator.memories


def test_json_output_has_a_line_per_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = pa.schema([("id", pa.int64())])
    for name in ("events", "clicks", "b-events"):
        Table.create(str(tmp_path / name), schema).append(pa.table({"id": [1]}, schema=schema))
    _manifests(tmp_path)
    argv = ["run", "--local", str(tmp_path / "all.yaml"), "--once", "--json", "--no-events"]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    policies = {(d["kind"], d["namespace"], d["policy"]): d for d in docs if "policyStatus" in d}
    compact = policies["CompactionPolicy", "a", "compact"]["policyStatus"]
    assert compact["matchedTableCount"] == 2 and compact["phase"] == "Active"
    assert policies["CheckpointPolicy", "b", "events"]["policyStatus"]["matchedTables"] == [
        "events"
    ]
    tables = [d for d in docs if "status" in d]  # the tables' lines, as before
    assert {(d["namespace"], d["table"]) for d in tables} == {
        ("a", "events"),
        ("a", "clicks"),
        ("b", "events"),
    }
