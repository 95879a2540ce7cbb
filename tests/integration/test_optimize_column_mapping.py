"""OPTIMIZE on tables with column mapping (name and id modes): files are read by physical name or
Parquet field id and written back with physical names and field ids, statistics and partition
values keyed by physical names.

deltalake (in a child process, tests/oracle_read.py) reads every table before and after: the same
rows, byte for byte. Tables are Spark's and Kernel's test tables (copied first) and tables
deltalake writes with ``delta.columnMapping.mode``.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from tests import oracle_read
from tests.integration.optimize_helpers import batch
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.model.physical import FIELD_ID_KEY
from txntable.engine.model.schema import parse_schema
from txntable.engine.storage.paths import decode_path, encode_path
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.executor_spark import SparkExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration


def _log(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def _commit(path: Path, actions: list[dict[str, Any]]) -> int:
    """Append a hand-written commit (the next version) and return its version."""
    version = Table.open(str(path)).snapshot().version + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    target = path / "_delta_log" / f"{version:020d}.json"
    with open(target, "x") as fh:
        fh.write("\n".join(lines) + "\n")
    return version


def _duplicate_files(path: Path) -> None:
    """Give every partition a second file: a copy of each live file under a new name."""
    snapshot = Table.open(str(path)).snapshot()
    adds = []
    for add in snapshot.add_actions():
        decoded = decode_path(add.path)
        name = f"part-{uuid.uuid4()}.c000.snappy.parquet"
        relative = str(Path(decoded).parent / name) if "/" in decoded else name
        shutil.copyfile(path / decoded, path / relative)
        obj = {**add.to_json(), "path": encode_path(relative), "dataChange": True}
        obj.pop("tags", None)
        adds.append({"add": obj})
    _commit(path, adds)


def _mapping(schema_string: str) -> dict[str, tuple[str, int | None]]:
    """Every struct field path (logical, dotted) -> (physical name, column mapping id)."""
    out: dict[str, tuple[str, int | None]] = {}

    def walk(prefix: str, fields: list[dict[str, Any]]) -> None:
        for f in fields:
            meta = f.get("metadata") or {}
            name = f"{prefix}{f['name']}"
            out[name] = (
                meta["delta.columnMapping.physicalName"],
                meta.get("delta.columnMapping.id"),
            )
            kind = f["type"]
            if isinstance(kind, dict) and kind.get("type") == "struct":
                walk(name + ".", kind["fields"])

    walk("", json.loads(schema_string)["fields"])
    return out


def _footer_ids(schema: pa.Schema) -> dict[str, int | None]:
    """Field path (physical, dotted, struct fields only) -> Parquet field id in the footer."""
    out: dict[str, int | None] = {}

    def walk(prefix: str, field: pa.Field) -> None:
        name = f"{prefix}{field.name}"
        raw = (field.metadata or {}).get(FIELD_ID_KEY)
        out[name] = int(raw) if raw is not None else None
        if pa.types.is_struct(field.type):
            for i in range(field.type.num_fields):
                walk(name + ".", field.type.field(i))

    for f in schema:
        walk("", f)
    return out


def _check_rewritten(path: Path, version: int) -> list[dict[str, Any]]:
    """Assert the files of OPTIMIZE commit ``version`` follow column mapping; their adds."""
    snapshot = Table.open(str(path)).snapshot()
    mapping = _mapping(snapshot.metadata.schema_string)
    partitions = set(snapshot.partition_columns)
    physical_partitions = {mapping[c][0] for c in partitions}
    data_top = {mapping[f.name][0] for f in snapshot.fields if f.name not in partitions}
    adds = [a["add"] for a in _log(path, version) if "add" in a]
    assert adds
    for add in adds:
        assert set(add["partitionValues"]) == physical_partitions
        if partitions:  # directories named as Spark names them: physical name=value
            assert add["path"].split("=")[0] in physical_partitions
        footer = pq.ParquetFile(path / decode_path(add["path"])).schema_arrow
        assert set(footer.names) == data_top  # physical names, partition columns left out
        ids = _footer_ids(footer)
        for logical, (_, column_id) in mapping.items():
            dotted = ".".join(
                mapping[".".join(logical.split(".")[: i + 1])][0]
                for i in range(logical.count(".") + 1)
            )
            if logical.split(".")[0] in partitions:
                continue
            assert dotted in ids, (logical, sorted(ids))
            assert ids[dotted] == column_id, logical  # field ids written, nested ones too
        stats = json.loads(add["stats"])
        assert set(stats["nullCount"]) == data_top  # keyed by physical names
        assert set(stats.get("minValues", {})) <= data_top
    return adds


@pytest.mark.parametrize("mode", ["name", "id"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_deltalake_tables_with_column_mapping_are_compacted(
    tmp_path: Path, mode: str, partitioned: bool
) -> None:
    path = tmp_path / f"t-{mode}"
    for i in range(5):
        write_deltalake(
            str(path),
            batch(i * 12, 12),
            mode="append",
            partition_by=["p"] if partitioned else None,
            configuration={"delta.columnMapping.mode": mode} if i == 0 else None,
        )
    before = oracle_read.read(path)
    files_before = Table.open(str(path)).snapshot().num_files
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    files_after = Table.open(str(path)).snapshot().num_files
    assert files_after < files_before
    assert files_after == (4 if partitioned else 1)  # part0..2 and null
    adds = _check_rewritten(path, result.version)
    records = sum(json.loads(a["stats"])["numRecords"] for a in adds)
    assert records == before["rows"]
    # a second run finds nothing to do: the planner groups files by their physical partitions
    again = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert again.bins_planned == 0


@pytest.mark.parametrize(
    "name",
    [
        "column-mapping-id",
        "table_with_column_mapping",
        "data-reader-partition-values-column-mapping-name",
    ],
)
def test_spark_tables_with_column_mapping_are_compacted(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    if name != "column-mapping-id":  # one file per partition: give each a second one
        _duplicate_files(path)
    before = oracle_read.read(path)
    files_before = Table.open(str(path)).snapshot().num_files
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    assert Table.open(str(path)).snapshot().num_files < files_before
    _check_rewritten(path, result.version)


def test_id_mode_files_without_field_ids_are_read_by_physical_name(table_copy: Any) -> None:
    """A file some writer stored without Parquet field ids: its columns are matched by their
    physical names instead, and the rewrite writes the ids."""
    path = table_copy("column-mapping-id")
    snapshot = Table.open(str(path)).snapshot()
    add = next(snapshot.add_actions())
    data = pq.read_table(path / add.path)
    plain = pa.Table.from_arrays(
        data.columns, schema=pa.schema([pa.field(f.name, f.type) for f in data.schema])
    )
    assert plain.schema.field(0).metadata is None
    name = f"part-{uuid.uuid4()}.c000.snappy.parquet"
    pq.write_table(plain, path / name)
    size = (path / name).stat().st_size
    stats = json.dumps({"numRecords": plain.num_rows})
    _commit(
        path,
        [{"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": 1,
                  "dataChange": True, "stats": stats}}],
    )  # fmt: skip
    values = sorted(
        v
        for a in Table.open(str(path)).snapshot().add_actions()
        for v in pq.read_table(path / a.path).column(0).to_pylist()
    )
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 3, result.skipped
    (only,) = [a["add"] for a in _log(path, result.version) if "add" in a]
    written = pq.read_table(path / only["path"])
    assert sorted(written.column(0).to_pylist()) == values  # nothing became null
    assert written.schema.field(0).metadata == {FIELD_ID_KEY: b"1"}


def test_files_written_before_column_mapping_was_enabled(tmp_path: Path) -> None:
    """Enabling name mode on an existing table keeps each column's name as its physical name
    (Delta's upgrade): the old files are read by those names; a renamed column keeps its data."""
    path = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(path), batch(i * 10, 10), mode="append", partition_by=["p"])
    snapshot = Table.open(str(path)).snapshot()
    fields = json.loads(snapshot.metadata.schema_string)["fields"]
    next_id = 0

    def assign(fs: list[dict[str, Any]]) -> None:
        nonlocal next_id
        for f in fs:
            next_id += 1
            f["metadata"] = {
                **(f.get("metadata") or {}),
                "delta.columnMapping.id": next_id,
                "delta.columnMapping.physicalName": f["name"],
            }
            if isinstance(f["type"], dict) and f["type"].get("type") == "struct":
                assign(f["type"]["fields"])

    assign(fields)
    renamed = next(f for f in fields if f["name"] == "i32")
    renamed["name"] = "renamed i32"  # a rename needs column mapping: data stays under "i32"
    meta = snapshot.metadata.to_json()
    meta["schemaString"] = json.dumps({"type": "struct", "fields": fields})
    meta["configuration"] = {
        **meta.get("configuration", {}),
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": str(next_id),
    }
    _commit(
        path, [{"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}, {"metaData": meta}]
    )
    before = oracle_read.read(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    for add in (a["add"] for a in _log(path, result.version) if "add" in a):
        data = pq.read_table(path / add["path"])
        assert "i32" in data.column_names and data.column("i32").null_count < data.num_rows
        assert set(add["partitionValues"]) == {"p"}


def test_schema_helpers_see_physical_names(table_copy: Any) -> None:
    """The Kernel table's partition columns are all physical in its log: the parsed schema
    knows both names, and the planner groups by them (one bin per partition)."""
    path = table_copy("data-reader-partition-values-column-mapping-name")
    _duplicate_files(path)
    fields = parse_schema(Table.open(str(path)).snapshot().metadata.schema_string)
    assert all(f.physical_name.startswith("col-") for f in fields)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor(), dry_run=True)
    assert result.bins_planned == 3  # three partitions, two files each


@pytest.mark.spark
def test_spark_executor_rewrites_a_column_mapped_table(tmp_path: Path, spark: Any) -> None:
    """The bins run as Spark tasks (local mode): the same physical layout as the Arrow path."""
    path = tmp_path / "t"
    for i in range(4):
        write_deltalake(
            str(path),
            batch(i * 15, 15),
            mode="append",
            partition_by=["p"],
            configuration={"delta.columnMapping.mode": "id"} if i == 0 else None,
        )
    before = oracle_read.read(path)
    executor = SparkExecutor(spark=spark)
    result = optimize(Table.open(str(path)), OptimizeOptions(), executor)
    executor.close()
    assert result.error is None and result.executor == "spark", result.skipped
    assert result.bins_committed == 4
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    _check_rewritten(path, result.version)


def test_z_order_sorts_by_the_physical_columns(tmp_path: Path) -> None:
    path = tmp_path / "t"
    for i in range(4):
        write_deltalake(
            str(path),
            batch(i * 25, 25),
            mode="append",
            configuration={"delta.columnMapping.mode": "name"} if i == 0 else None,
        )
    before = oracle_read.read(path)
    policy = OptimizeOptions(z_order_by=("i32", "d"))
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1, result.skipped
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    (add,) = _check_rewritten(path, result.version)
    assert json.loads(add["tags"]["txntable.zOrderBy"]) == ["i32", "d"]  # logical, as asked
    again = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert again.bins_planned == 0  # the tag is recognised: nothing to re-cluster
