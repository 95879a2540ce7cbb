"""Local mode keeps the controller's limit of runs in flight across tables, as the cluster does.

``maxConcurrentRuns`` bounds the runs in flight over every table: the Kopf driver counts the
other tables' runs toward it. ``txntable run --local`` had its own loop, which passed no such
count, so each table saw only its own runs and two fragmented tables started two compactions
under a limit of one. Both now tick through one driver (``handlers.driver``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.unit.handlers.test_failed_runs import MemoryLauncher, fragmented
from txntable.api.constants import LABEL_TABLE
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.cli.local_manifests import Manifests
from txntable.cli.run_cmd import reconcile_loop
from txntable.config import Config
from txntable.handlers.operate import Operator
from txntable.launch import RunStatus

T0 = datetime(2026, 11, 27, 10, 0, 7, tzinfo=UTC)


class TableLauncher(MemoryLauncher):
    """``MemoryLauncher`` listing each table's runs only."""

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        return [r for r in super().list_runs(namespace, table) if r.labels[LABEL_TABLE] == table]


def _table(name: str, location: Path) -> TxnTable:
    return TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"location": str(location), "compactionPolicyRef": {"name": "compact"}},
        }
    )


def test_two_tables_start_no_more_runs_than_the_limit(tmp_path: Path) -> None:
    for name in ("a", "b"):
        fragmented(tmp_path / name)
    policy = CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": "compact", "namespace": "default"},
            "spec": {"triggers": {"smallFiles": 4}},
        }
    )
    manifests = Manifests(
        tables=[_table("a", tmp_path / "a"), _table("b", tmp_path / "b")], compaction=[policy]
    )
    launcher = TableLauncher([T0])
    operator = Operator(
        config=Config(default_backend="local", max_concurrent_runs=1),
        launchers=lambda _backend: launcher,
        clock=lambda: T0,
    )
    tables = reconcile_loop(manifests, operator, once=False, interval=0, max_ticks=2)
    assert len(launcher.launched) == 1, launcher.launched
    limited = {c.type: c for c in tables[1].status.conditions}["Compacting"]
    assert "at once" in limited.message, limited
