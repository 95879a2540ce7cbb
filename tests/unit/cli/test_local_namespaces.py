"""Local mode keeps namespaces apart, as the cluster does: a table sees only the policies of its
own namespace, and output names tables as namespace/name (two tables called ``events`` in two
namespaces used to share policies and one output line)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from txntable.api.types import TxnTable
from txntable.cli.local_manifests import load_manifests
from txntable.cli.run_cmd import reconcile_loop
from txntable.controller.memory import TableMemories

MANIFESTS = """
apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {name: events, namespace: a}
spec: {location: /tmp/a/events}
---
apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {name: events, namespace: b}
spec: {location: /tmp/b/events}
---
apiVersion: txntable.io/v1alpha1
kind: CompactionPolicy
metadata: {name: compact, namespace: a}
spec: {triggers: {smallFiles: 2}}
---
apiVersion: txntable.io/v1alpha1
kind: CheckpointPolicy
metadata: {name: ckpt, namespace: b}
spec: {}
"""


class _Recorder:
    def __init__(self) -> None:
        self.seen: dict[str, tuple[list[str], list[str]]] = {}
        self.memories = TableMemories()  # what the driver keeps per table
        self.metrics = None

    def reconcile(self, table: TxnTable, compaction: Any, checkpoint: Any, **_: Any) -> Any:
        key = f"{table.metadata.namespace}/{table.metadata.name}"
        self.seen[key] = (
            [f"{p.metadata.namespace}/{p.metadata.name}" for p in compaction],
            [f"{p.metadata.namespace}/{p.metadata.name}" for p in checkpoint],
        )
        return SimpleNamespace(status=table.status, launched=(), active_runs=0, events=())


def test_each_table_sees_only_its_namespaces_policies(tmp_path: Path) -> None:
    (tmp_path / "all.yaml").write_text(MANIFESTS)
    manifests = load_manifests(tmp_path)
    assert not manifests.errors
    recorder = _Recorder()
    reconcile_loop(manifests, recorder, once=True, interval=0)  # type: ignore[arg-type]
    assert recorder.seen == {
        "a/events": (["a/compact"], []),
        "b/events": ([], ["b/ckpt"]),
    }
