"""Tables we write, read by an independent engine (delta-rs): schema, rows, partitions, stats."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from deltalake import DeltaTable, write_deltalake

from txntable.engine.table import Table

pytestmark = pytest.mark.integration

UTC = dt.UTC
SPECIAL = ["plain", "a b", "x=1/y", "50%", "#hash", "kölsch", "qu'ote", "", None]


def _sorted(table: pa.Table, key: str = "id") -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: r[key])  # type: ignore[arg-type, return-value]


def _dl_rows(path: Path) -> list[dict[str, object]]:
    return _sorted(pa.table(DeltaTable(str(path)).to_pyarrow_table()))


def test_deltalake_reads_schema_rows_and_special_partition_values(tmp_path: Path) -> None:
    struct = pa.struct([("x", pa.int32()), ("y", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("part", pa.string()),
            ("amount", pa.decimal128(10, 2)),
            ("ratio", pa.float64()),
            ("flag", pa.bool_()),
            ("day", pa.date32()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("nested", struct),
            ("tags", pa.list_(pa.string())),
        ]
    )
    rows = pa.table(
        {
            "id": list(range(len(SPECIAL))),
            "part": SPECIAL,
            "amount": [Decimal(f"{i}.25") for i in range(len(SPECIAL))],
            "ratio": [i / 3 for i in range(len(SPECIAL))],
            "flag": [i % 2 == 0 for i in range(len(SPECIAL))],
            "day": [dt.date(2024, 1, 1 + i) for i in range(len(SPECIAL))],
            "at": [
                dt.datetime(2024, 1, 1, 12, i, 30, 123456, tzinfo=UTC) for i in range(len(SPECIAL))
            ],
            "nested": [{"x": i, "y": f"s{i}"} for i in range(len(SPECIAL))],
            "tags": [[f"t{i}"] for i in range(len(SPECIAL))],
        },
        schema=schema,
    )
    table = Table.create(str(tmp_path), schema, partition_by=["part"])
    table.append(rows)

    dl = DeltaTable(str(tmp_path))
    assert dl.version() == 1
    assert [f.name for f in dl.schema().fields] == schema.names
    assert dl.metadata().partition_columns == ["part"]
    got = _dl_rows(tmp_path)
    expected = _sorted(rows)
    for row in expected:  # an empty-string partition value is null, as in Spark
        row["part"] = row["part"] or None
    assert got == expected
    # every file is where deltalake expects it, and partition values come back typed
    actions = pa.table(dl.get_add_actions(flatten=True))
    assert set(actions.column("partition.part").to_pylist()) == {v or None for v in SPECIAL}
    for uri in dl.file_uris():
        assert Path(uri).exists(), uri


def test_typed_partition_columns_round_trip(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int32()),
            ("n", pa.int64()),
            ("d", pa.date32()),
            ("t", pa.timestamp("us", tz="UTC")),
            ("b", pa.bool_()),
        ]
    )
    rows = pa.table(
        {
            "id": [1, 2, 3],
            "n": [7, None, -3],
            "d": [dt.date(2024, 2, 29), None, dt.date(1999, 12, 31)],
            "t": [dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC), None, None],
            "b": [True, None, False],
        },
        schema=schema,
    )
    table = Table.create(str(tmp_path), schema, partition_by=["n", "d", "t", "b"])
    table.append(rows)
    assert _dl_rows(tmp_path) == _sorted(rows)
    ours = table.snapshot().partition_values()
    assert sorted(ours.column("n").to_pylist(), key=str) == sorted([7, None, -3], key=str)


def test_deltalake_uses_our_statistics_to_skip_files(tmp_path: Path) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("at", pa.timestamp("us", "UTC"))]
    )
    table = Table.create(str(tmp_path), schema)
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    for batch in range(4):
        ids = list(range(batch * 100, batch * 100 + 100))
        table.append(
            pa.table(
                {
                    "id": ids,
                    "name": [f"n{i:04d}" for i in ids],
                    "at": [base + dt.timedelta(minutes=i) for i in ids],
                },
                schema=schema,
            )
        )
    dl = DeltaTable(str(tmp_path))
    actions = pa.table(dl.get_add_actions(flatten=True)).sort_by("min.id")
    assert actions.column("min.id").to_pylist() == [0, 100, 200, 300]
    assert actions.column("max.id").to_pylist() == [99, 199, 299, 399]
    assert actions.column("max.name").to_pylist()[0] == "n0099"
    assert actions.column("num_records").to_pylist() == [100] * 4
    dataset = dl.to_pyarrow_dataset()
    assert len(list(dataset.get_fragments())) == 4
    assert len(list(dataset.get_fragments(filter=pads.field("id") >= 250))) == 2
    assert len(list(dataset.get_fragments(filter=pads.field("name") == "n0150"))) == 1
    late = base + dt.timedelta(minutes=390)
    assert len(list(dataset.get_fragments(filter=pads.field("at") > pa.scalar(late)))) == 1


def test_overwrite_and_delete_are_seen_by_deltalake(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    table = Table.create(str(tmp_path), schema, partition_by=["p"])
    table.append(pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "c"]}))
    table.overwrite(pa.table({"id": [10], "p": ["a"]}), "p = 'a'")
    table.delete("p IN ('c')")
    assert _dl_rows(tmp_path) == [{"id": 3, "p": "b"}, {"id": 10, "p": "a"}]
    history = DeltaTable(str(tmp_path)).history()
    assert [h["operation"] for h in history] == ["DELETE", "WRITE", "WRITE", "CREATE TABLE"]


def test_mixed_writers_on_one_table(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    write_deltalake(
        str(tmp_path), pa.table({"id": [1], "p": ["a"]}, schema=schema), partition_by=["p"]
    )
    table = Table.open(str(tmp_path))
    table.append(pa.table({"id": [2], "p": ["b"]}))
    write_deltalake(str(tmp_path), pa.table({"id": [3], "p": ["a"]}, schema=schema), mode="append")
    table.append(pa.table({"id": [4], "p": [None]}, schema=schema))
    assert [r["id"] for r in _dl_rows(tmp_path)] == [1, 2, 3, 4]
    assert table.snapshot().version == 3 == DeltaTable(str(tmp_path)).version()
    assert sorted(table.snapshot().file_uris()) == sorted(DeltaTable(str(tmp_path)).file_uris())
    commit = (tmp_path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()
    info = json.loads(commit[0])["commitInfo"]
    assert info["isBlindAppend"] is True and info["readVersion"] == 0
