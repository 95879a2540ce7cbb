"""OPTIMIZE end to end on in-memory storage: the object-store code path (files written as
buffers through ``Storage.write``, read through ``open_input``), planning, batching, commit."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.engine.actions import parse_commit
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.maintenance.planner import OptimizePolicy

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("s", pa.string())])


def rows(table: Table) -> Counter[str]:
    snapshot = table.snapshot()
    out: Counter[str] = Counter()
    storage = table.storage
    for path, values in zip(
        snapshot.files().column("path").to_pylist(),
        snapshot.raw_partition_values(),
        strict=True,
    ):
        with storage.open_input(path) as fh:  # type: ignore[union-attr]
            for row in pq.read_table(fh).to_pylist():
                out[json.dumps({**row, **values}, sort_keys=True)] += 1
    return out


def test_optimize_in_memory_storage() -> None:
    uri = f"memory://optimize-{uuid.uuid4().hex}"
    table = Table.create(uri, SCHEMA, ["p"])
    for i in range(6):
        table.append(
            pa.table(
                {
                    "id": list(range(i * 10, i * 10 + 10)),
                    "p": ["a", "b"] * 5,
                    "s": [None if k % 3 == 0 else f"v{k}" for k in range(10)],
                },
                schema=SCHEMA,
            )
        )
    before = rows(table)
    assert table.snapshot().num_files == 12
    result = optimize(table, OptimizePolicy(commit_batch_bytes=1), ArrowExecutor())
    assert result.error is None and result.bins_committed == 2 and len(result.commits) == 2
    assert table.snapshot().num_files == 2
    assert rows(table) == before
    actions = parse_commit(table.storage.read_log(f"{result.version:020d}.json"))
    adds = [a for a in actions if type(a).__name__ == "AddFile"]
    assert len(adds) == 1 and adds[0].data_change is False
    assert json.loads(adds[0].stats or "{}")["numRecords"] == 30
