"""OPTIMIZE end to end on in-memory storage: the object-store code path (files written as
buffers through ``Storage.write``, read through ``open_input``), planning, batching, commit."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.model.actions import parse_commit
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

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
    result = optimize(table, OptimizeOptions(partial_commit_size=1), ArrowExecutor())
    assert result.error is None and result.bins_committed == 2 and len(result.commits) == 2
    assert table.snapshot().num_files == 2
    assert rows(table) == before
    actions = parse_commit(table.storage.read_log(f"{result.version:020d}.json"))
    adds = [a for a in actions if type(a).__name__ == "AddFile"]
    assert len(adds) == 1 and adds[0].data_change is False
    assert json.loads(adds[0].stats or "{}")["numRecords"] == 30


def test_read_predicate_covers_exactly_the_touched_partitions() -> None:
    from txntable.engine.model.predicates import bind
    from txntable.engine.model.schema import parse_schema
    from txntable.maintenance.batch import MAX_PREDICATE_PARTITIONS, read_predicate
    from txntable.maintenance.planner import Bin

    def b(**values: str | None) -> Bin:
        return Bin(partition_values=dict(values), paths=("x",), sizes=(1,))

    schema = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}}
                for n, t in (("id", "long"), ("d", "date"), ("r", "string"))
            ],
        }
    )
    fields = parse_schema(schema)
    bins = [b(d="2024-01-02", r="eu"), b(d=None, r="us"), b(d="2024-01-02", r="eu")]
    predicate = read_predicate(None, ["d", "r"], bins)
    bound = bind(predicate, fields, ["d", "r"])
    import datetime as dt

    values = pa.table(
        {
            "d": pa.array(
                [dt.date(2024, 1, 2), None, dt.date(2024, 1, 2), None, dt.date(2024, 1, 3)],
                pa.date32(),
            ),
            "r": ["eu", "us", "us", None, "eu"],
        }
    )
    assert bound.matches(values).to_pylist() == [True, True, False, False, False]
    assert read_predicate("r = 'eu'", [], bins) == "r = 'eu'"  # unpartitioned: the run's
    many = [b(d=None, r=str(i)) for i in range(MAX_PREDICATE_PARTITIONS + 1)]
    assert read_predicate("r > '1'", ["d", "r"], many) == "r > '1'"
