"""What deltalake and our reader see of a table, and Spark's replay beside ours, for checkpoints."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests import deltagen as g
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.jobs.checkpoint import reconstruct_state


def _relative(doc: dict[str, Any], root: Path) -> dict[str, Any]:
    prefix = str(root.resolve()) + "/"
    files = {k.replace("file://", "").replace(prefix, ""): v for k, v in doc["files"].items()}
    return {**doc, "files": files}


def _deltalake(root: Path) -> dict[str, Any]:
    from deltalake import DeltaTable

    return _relative(g.expected(DeltaTable(str(root))), root)


def _ours(root: Path) -> dict[str, Any]:
    return _relative(g.observed(Snapshot.load(LocalStorage(str(root)))), root)


def _drop_commits_before(root: Path, version: int) -> None:
    for v in range(version):
        (root / "_delta_log" / f"{v:020d}.json").unlink(missing_ok=True)
        (root / "_delta_log" / f"{v:020d}.crc").unlink(missing_ok=True)


def _deltalake_table(tmp_path: Path) -> Path:
    """Partitions with nulls, a tombstone, txn actions and statistics, all written by delta-rs."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    root = tmp_path / "dl"
    data = pa.table(
        {
            "id": pa.array([1, 2, None, 4], pa.int64()),
            "name": ["a", None, "c", "d"],
            "part": ["x", None, "y", "x"],
        }
    )
    write_deltalake(str(root), data, partition_by=["part"])
    props = CommitProperties(app_transactions=[Transaction(app_id="stream-1", version=7)])
    write_deltalake(str(root), data, mode="append", commit_properties=props)
    write_deltalake(str(root), data.slice(0, 2), mode="overwrite", partition_by=["part"])
    write_deltalake(str(root), data.slice(2), mode="append")
    return root


def _sorted_rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def assert_replays_on_object_store(
    spark: Any, uri: str, options: dict[str, str], rows: Callable[[list[int], str], pa.Table]
) -> None:
    """The Spark replay of a table in an object store equals our snapshot replay (a classic
    checkpoint plus commits after it, a tombstone among them); the checkpoint written from it
    alone then tells our reader the same table. The tasks read through the engine's storage:
    Spark's own readers have no S3 or Azure filesystem here. Leaves 2 rows at version 4."""
    from txntable.engine.table import Table
    from txntable.jobs.checkpoint import run_checkpoint

    table = Table.open(uri, options)
    table.append(rows([1], "a"))
    table.append(rows([2], "b"))
    write_checkpoint(table.snapshot())  # inline, at version 2
    table.append(rows([3], "a"))
    table.delete("p = 'b'")  # a tombstone after the checkpoint
    expected = Table.open(uri, options).snapshot()
    state = reconstruct_state(spark, table.storage, storage_options=options)
    assert state.version == expected.version == 4
    assert _sorted_rows(state.files) == _sorted_rows(expected.files())
    assert _sorted_rows(state.tombstones) == _sorted_rows(expected.tombstones())
    assert state.tombstones.num_rows == 1
    assert (state.protocol, state.metadata) == (expected.protocol, expected.metadata)
    result = run_checkpoint(uri, spark=spark, storage_options=options)
    assert (result.version, result.num_of_add_files) == (4, expected.num_files)
    for v in range(4):
        table.storage.delete(f"_delta_log/{v:020d}.json")
    reread = Table.open(uri, options).snapshot()  # checkpoints say dataChange=false
    assert _sorted_rows(reread.files().drop_columns(["dataChange"])) == _sorted_rows(
        expected.files().drop_columns(["dataChange"])
    )
