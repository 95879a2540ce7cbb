"""The log replay's task functions, run here as Spark would run them, without Spark: every log
file read by ``read_pieces``, the rows grouped by hash partition, each partition reconciled,
the driver's ``assemble``; the state must be our snapshot replay's (the Spark runs are in
tests/integration/test_checkpoint_spark.py and test_spark_cluster.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import InvalidActionError
from txntable.engine.read.segment import build_segment
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.state import TableState
from txntable.engine.storage.base import LocalStorage
from txntable.engine.table import Table
from txntable.maintenance.replay_spark import (
    assemble,
    log_pieces,
    newest_per_key,
    read_pieces,
    reconcile,
)

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def replay_without_spark(root: Path, partitions: int, slices: int = 2) -> TableState:
    storage = LocalStorage(str(root))
    segment = build_segment(storage)
    pieces = log_pieces(storage, segment)
    groups: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for k in range(slices):  # the map tasks, each with its slice of the log files
        for pid, blob in read_pieces(pieces[k::slices], str(root), {}, partitions):
            groups[pid].append((pid, blob))
    results = [out for i in range(partitions + 1) for out in reconcile(i, groups[i], partitions)]
    return assemble(segment.version, results)


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def _same(state: TableState, root: Path) -> None:
    expected = Snapshot.load(LocalStorage(str(root)))
    assert state.version == expected.version
    assert _rows(state.files) == _rows(expected.files())
    assert _rows(state.tombstones) == _rows(expected.tombstones())
    assert (state.protocol, state.metadata) == (expected.protocol, expected.metadata)
    assert state.txns == expected.state.txns and state.domains == expected.state.domains


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    lines = "".join(json.dumps(a) + "\n" for a in actions)
    (root / "_delta_log" / f"{version:020d}.json").write_text(lines)


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_checkpoint_and_commits_after_it(tmp_path: Path, partitions: int) -> None:
    root = tmp_path / "t"
    table = Table.create(str(root), SCHEMA, ["p"])
    for i in range(4):
        table.append(pa.table({"id": [i, i + 10], "p": ["a", "b"]}, schema=SCHEMA))
    write_checkpoint(table.snapshot(), part_size=3)  # multi-part, at version 4
    table.delete("p = 'b'")
    table.append(pa.table({"id": [99], "p": ["c"]}, schema=SCHEMA))
    state = replay_without_spark(root, partitions)
    assert state.files.num_rows == 5 and state.tombstones.num_rows == 4
    _same(state, root)


def test_within_one_commit_the_later_action_wins(tmp_path: Path) -> None:
    """A commit may remove and re-add the same file (same path, no deletion vector), or add and
    then remove it: the inline replay keeps the later one, and so do the reduce tasks."""
    root = tmp_path / "t"
    table = Table.create(str(root), SCHEMA)
    table.append(pa.table({"id": [1], "p": ["a"]}, schema=SCHEMA))
    table.append(pa.table({"id": [2], "p": ["a"]}, schema=SCHEMA))
    first, second = (a.to_json() for a in table.snapshot().add_actions())
    readd = {"remove": {"path": first["path"], "deletionTimestamp": 5, "dataChange": True}}
    _commit(root, 3, [readd, {"add": {**first, "dataChange": False}}])
    gone = {"remove": {"path": second["path"], "deletionTimestamp": 6, "dataChange": True}}
    _commit(root, 4, [{"add": {**second, "dataChange": False}}, gone])
    state = replay_without_spark(root, partitions=2)
    assert state.files.column("path").to_pylist() == [first["path"]]
    assert state.tombstones.column("path").to_pylist() == [second["path"]]
    _same(state, root)


def test_newest_per_key_keeps_the_highest_rank() -> None:
    rows = pa.table({"key": ["b", "a", "b", "a", "c"], "rank": [1, 9, 7, 3, 2]})
    kept = newest_per_key(rows)
    assert sorted(zip(kept["key"].to_pylist(), kept["rank"].to_pylist(), strict=True)) == [
        ("a", 9),
        ("b", 7),
        ("c", 2),
    ]


def test_a_corrupt_commit_fails_its_task_with_the_engine_error(tmp_path: Path) -> None:
    root = tmp_path / "t"
    Table.create(str(root), SCHEMA).append(pa.table({"id": [1], "p": ["a"]}, schema=SCHEMA))
    (root / "_delta_log" / f"{1:020d}.json").write_text("{not json\n")
    with pytest.raises(InvalidActionError, match="line 1 is not valid JSON"):
        replay_without_spark(root, partitions=2)
