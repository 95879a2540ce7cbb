"""Tables with each table feature no Python writer makes, built from hand-written protocol and
metaData actions and pyarrow-written data files, for the maintenance tests.

Every builder writes a table of several versions at ``root`` with real Parquet data files
(physical names and Parquet field ids under column mapping, statistics keyed as the log keys
them) and returns nothing. ``BUILDERS`` names them all; ``COLUMN_MAPPED`` etc. group them by what
the maintenance steps can do with them.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests import deltagen as g
from txntable.engine.model.stats import stats_for_table

ID = b"PARQUET:field_id"
CLUSTERING = "delta.clustering"
UTC = dt.UTC


def field(
    name: str,
    typ: Any,
    column_id: int | None = None,
    physical: str | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A Delta schema field (with column mapping metadata when ``column_id`` is given)."""
    meta = dict(metadata)
    if column_id is not None:
        meta["delta.columnMapping.id"] = column_id
        meta["delta.columnMapping.physicalName"] = physical or f"col-{name}-{column_id}"
    return {"name": name, "type": typ, "nullable": True, "metadata": meta}


def schema(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)})


def with_id(name: str, typ: pa.DataType, column_id: int | None) -> pa.Field:
    meta = {ID: str(column_id).encode()} if column_id is not None else None
    return pa.field(name, typ, metadata=meta)


def data_file(
    root: Path,
    relative: str,
    data: pa.Table,
    partition_values: Mapping[str, str | None] | None = None,
    *,
    opaque: Sequence[tuple[str, ...]] = (),
    int96: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """Write ``data`` (physical columns) at ``relative``; its ``add`` action with stats (the
    row count only for INT96 files, as some writers do: their bounds are what is under test)."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, use_deprecated_int96_timestamps=int96)
    if int96:
        stats = json.dumps({"numRecords": data.num_rows})
    else:
        stats = stats_for_table(data, opaque=opaque)
    return g.add(relative, path.stat().st_size, partition_values, stats=stats, **extra)


def create(
    root: Path,
    protocol: dict[str, Any],
    fields: Sequence[dict[str, Any]],
    partition_columns: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    *extra: dict[str, Any],
) -> None:
    """Version 0: protocol, metaData of ``fields``, then ``extra`` actions (domains)."""
    metadata = g.metadata(partition_columns, configuration, schema_string=schema(*fields))
    g.write_commit(root, 0, [g.commit_info("CREATE TABLE"), protocol, metadata, *extra])


def append(root: Path, version: int, relative: str, data: pa.Table, *args: Any, **kw: Any) -> None:
    """Commit ``version`` adding one data file (``data_file``'s arguments)."""
    g.write_commit(root, version, [g.commit_info(), data_file(root, relative, data, *args, **kw)])


def domain(name: str, configuration: str) -> dict[str, Any]:
    return {"domainMetadata": {"domain": name, "configuration": configuration, "removed": False}}


def _times(n: int, start: int = 0) -> pa.Array:
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return pa.array(
        [base + dt.timedelta(hours=i + start) for i in range(n)], pa.timestamp("us", "UTC")
    )


# -- column mapping ----------------------------------------------------------------------------
def column_mapping_name(root: Path) -> None:
    """Name mode, partitioned, a nested struct; a column renamed, one dropped, a file replaced."""
    struct_type = {
        "type": "struct",
        "fields": [field("x", "integer", 11, "col-sx"), field("y", "string", 12, "col-sy")],
    }
    fields = [
        field("a", "long", 1, "col-a"),
        field("s", struct_type, 2, "col-s"),
        field("ts", "timestamp", 3, "col-ts"),
        field("p", "string", 4, "col-p"),
    ]
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "12"}
    s_arrow = pa.struct([with_id("col-sx", pa.int32(), 11), with_id("col-sy", pa.string(), 12)])

    def batch(n: int, start: int) -> pa.Table:
        return pa.Table.from_arrays(
            [
                pa.array(range(start, start + n), pa.int64()),
                pa.array([{"col-sx": i, "col-sy": f"y{i}"} for i in range(n)], s_arrow),
                _times(n, start),
            ],
            schema=pa.schema(
                [
                    with_id("col-a", pa.int64(), 1),
                    with_id("col-s", s_arrow, 2),
                    with_id("col-ts", pa.timestamp("us", "UTC"), 3),
                ]
            ),
        )

    create(root, g.protocol(2, 5), fields, ["p"], config)
    append(root, 1, "col-p=a/f1.parquet", batch(5, 0), {"col-p": "a"})
    append(root, 2, "col-p=a/f2.parquet", batch(4, 10), {"col-p": "a"})
    renamed = [dict(fields[0], name="a2"), *fields[1:]]
    g.write_commit(
        root,
        3,
        [g.commit_info("RENAME COLUMN"), g.metadata(["p"], config, schema_string=schema(*renamed))],
    )
    dropped = [renamed[0], renamed[1], renamed[3]]
    g.write_commit(
        root,
        4,
        [g.commit_info("DROP COLUMNS"), g.metadata(["p"], config, schema_string=schema(*dropped))],
    )
    append(root, 5, "col-p=b/f3.parquet", batch(3, 20).drop_columns(["col-ts"]), {"col-p": "b"})
    g.write_commit(
        root,
        6,
        [
            g.commit_info("DELETE"),
            g.remove("col-p=a/f1.parquet", deletionTimestamp=_now_ms()),
            data_file(root, "col-p=a/f1b.parquet", batch(2, 30), {"col-p": "a"}),
            {"txn": {"appId": "app", "version": 7, "lastUpdated": _now_ms()}},
        ],
    )


def column_mapping_id(root: Path) -> None:
    """Id mode: the files name their columns differently; only the field ids match."""
    fields = [
        field("k", "long", 1, "col-k"),
        field("v", "string", 2, "col-v"),
        field("p", "integer", 3, "col-p"),
    ]
    config = {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "3"}
    protocol = g.protocol(3, 7, readerFeatures=["columnMapping"], writerFeatures=["columnMapping"])
    create(root, protocol, fields, ["p"], config)
    for v in range(1, 4):
        data = pa.Table.from_arrays(
            [pa.array([v, v + 10], pa.int64()), pa.array([f"v{v}", None])],
            schema=pa.schema(
                [with_id(f"old_k{v}", pa.int64(), 1), with_id(f"old_v{v}", pa.string(), 2)]
            ),
        )
        append(root, v, f"col-p={v % 2}/f{v}.parquet", data, {"col-p": str(v % 2)})


# -- the rest ----------------------------------------------------------------------------------
def _now_ms() -> int:
    return int(dt.datetime.now(UTC).timestamp() * 1000)


def _variant(n: int) -> pa.Array:
    typ = pa.struct([("value", pa.binary()), ("metadata", pa.binary())])
    return pa.array(
        [{"value": bytes([12, i]), "metadata": bytes([1, 0, 0])} for i in range(n)], typ
    )


def variant_preview(root: Path) -> None:
    """variantType-preview, stats also written as a struct by checkpoints."""
    protocol = g.protocol(
        3, 7, readerFeatures=["variantType-preview"], writerFeatures=["variantType-preview"]
    )
    fields = [field("id", "long"), field("v", "variant")]
    config = {"delta.checkpoint.writeStatsAsStruct": "true"}
    create(root, protocol, fields, (), config)
    for v in range(1, 4):
        data = pa.table({"id": pa.array([v, v + 100], pa.int64()), "v": _variant(2)})
        append(root, v, f"f{v}.parquet", data, opaque=[("v",)])


def _iceberg(root: Path, feature: str, mapping: bool, arrays: bool) -> None:
    enable = {
        "icebergCompatV1": "delta.enableIcebergCompatV1",
        "icebergCompatV2": "delta.enableIcebergCompatV2",
    }
    config = {enable[feature]: "true", "delta.universalFormat.enabledFormats": "iceberg"}
    fields = [
        field("id", "long", 1 if mapping else None, "col-id"),
        field("p", "string", 2 if mapping else None, "col-p"),
    ]
    arrow = [with_id("col-id" if mapping else "id", pa.int64(), 1 if mapping else None)]
    if arrays:
        nested = {"col-tags.element": 10}
        fields.append(
            field(
                "tags",
                {"type": "array", "elementType": "integer", "containsNull": True},
                3,
                "col-tags",
                **{"delta.columnMapping.nested.ids": nested},
            )
        )
        element = pa.field("element", pa.int32(), metadata={ID: b"10"})
        arrow.append(with_id("col-tags", pa.list_(element), 3))
    if mapping:
        config.update({"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "10"})
    protocol = (
        g.protocol(2, 7, writerFeatures=["columnMapping", feature, "appendOnly", "invariants"])
        if mapping
        else g.protocol(1, 7, writerFeatures=[feature])
    )
    key = "col-p" if mapping else "p"
    create(root, protocol, fields, ["p"], config)
    for v in range(1, 4):
        columns = [pa.array([v, v + 5], pa.int64())]
        if arrays:
            columns.append(pa.array([[v, 1], None], arrow[1].type))
        data = pa.Table.from_arrays(
            [*columns, pa.array(["x", "x"])],
            schema=pa.schema([*arrow, with_id(key, pa.string(), 2 if mapping else None)]),
        )
        append(root, v, f"{key}=x/f{v}.parquet", data, {key: "x"})
    meta = root / "metadata"  # UniForm's Iceberg metadata: the log references none of it
    meta.mkdir()
    (meta / "v1.metadata.json").write_text('{"format-version": 2}')


def iceberg_v2(root: Path) -> None:
    _iceberg(root, "icebergCompatV2", mapping=True, arrays=True)


def iceberg_v1(root: Path) -> None:
    _iceberg(root, "icebergCompatV1", mapping=True, arrays=False)


def iceberg_v2_without_mapping(root: Path) -> None:
    """icebergCompatV2 active on a table without column mapping: no writer can meet its rules."""
    _iceberg(root, "icebergCompatV2", mapping=False, arrays=False)


def _collated(root: Path, feature: str) -> None:
    protocol = g.protocol(1, 7, writerFeatures=[feature, "domainMetadata"])
    fields = [
        field("id", "long"),
        field("name", "string", __COLLATIONS={"name": "spark.UTF8_LCASE"}),
    ]
    create(root, protocol, fields, (), None, domain("delta.collations", '{"writeVersions":{}}'))
    for v, names in enumerate((["b", "A"], ["a", "B"], ["C"]), start=1):
        data = pa.table({"id": pa.array(range(len(names)), pa.int64()), "name": names})
        append(root, v, f"f{v}.parquet", data)


def collations(root: Path) -> None:
    _collated(root, "collations")


def collations_preview(root: Path) -> None:
    _collated(root, "collations-preview")


def liquid(root: Path) -> None:
    """Delta's first liquid clustering tables list ``liquid`` for ``clustering``."""
    protocol = g.protocol(1, 7, writerFeatures=["liquid", "domainMetadata"])
    fields = [field("x", "long"), field("y", "string")]
    create(root, protocol, fields, (), None, domain(CLUSTERING, '{"clusteringColumns":[["x"]]}'))
    for v in range(1, 4):
        data = pa.table({"x": pa.array([3 * v, v], pa.int64()), "y": [f"y{v}", None]})
        append(root, v, f"f{v}.parquet", data)


def materialized_partitions(root: Path) -> None:
    protocol = g.protocol(1, 7, writerFeatures=["materializePartitionColumns"])
    fields = [field("id", "long"), field("d", "date")]
    create(root, protocol, fields, ["d"], None)
    for v in range(1, 4):
        data = pa.table({"id": pa.array([v], pa.int64()), "d": pa.array([dt.date(2024, 5, 1)])})
        append(root, v, f"d=2024-05-01/f{v}.parquet", data, {"d": "2024-05-01"})


def checkpoint_protection(root: Path) -> None:
    """A dropped feature's barrier: checkpoints before version 2 are protected."""
    protocol = g.protocol(1, 7, writerFeatures=["checkpointProtection", "appendOnly", "invariants"])
    config = {"delta.requireCheckpointProtectionBeforeVersion": "2"}
    fields = [field("id", "long")]
    create(root, protocol, fields, (), config)
    for v in range(1, 5):
        append(root, v, f"f{v}.parquet", pa.table({"id": pa.array([v], pa.int64())}))


def type_widening(root: Path) -> None:
    """An integer column widened to long: the first files store int32."""
    protocol = g.protocol(3, 7, readerFeatures=["typeWidening"], writerFeatures=["typeWidening"])
    changes = [{"fromType": "integer", "toType": "long"}]
    config = {"delta.enableTypeWidening": "true"}
    widened = field("n", "long", **{"delta.typeChanges": changes})
    create(root, protocol, [field("n", "integer"), field("s", "string")], (), config)
    append(root, 1, "f1.parquet", pa.table({"n": pa.array([1, 2], pa.int32()), "s": ["a", "b"]}))
    wide = g.metadata((), config, schema_string=schema(widened, field("s", "string")))
    g.write_commit(root, 2, [g.commit_info("CHANGE COLUMN"), wide])
    append(root, 3, "f2.parquet", pa.table({"n": pa.array([2**40], pa.int64()), "s": ["c"]}))


def int96_edges(root: Path) -> None:
    """INT96 timestamps outside the nanosecond range (what pyarrow and Spark write)."""
    fields = [field("id", "long"), field("ts", "timestamp")]
    create(root, g.protocol(), fields, (), None)
    edges = [
        [
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            dt.datetime(1, 1, 1, tzinfo=UTC),
        ],
        [dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC), None],
        [dt.datetime(1677, 9, 21, tzinfo=UTC), dt.datetime(2262, 4, 12, tzinfo=UTC)],
    ]
    for v, values in enumerate(edges, start=1):
        data = pa.table(
            {
                "id": pa.array([v, v + 10], pa.int64()),
                "ts": pa.array(values, pa.timestamp("us", "UTC")),
            }
        )
        append(root, v, f"f{v}.parquet", data, int96=True)


def empty_schema(root: Path) -> None:
    """Old writers: metaData with an empty schemaString, then one without it at all."""
    meta = g.metadata()
    meta["metaData"]["schemaString"] = ""
    g.write_commit(root, 0, [g.commit_info("CREATE TABLE"), g.protocol(1, 1), meta])
    g.write_commit(
        root, 1, [g.commit_info(), {"txn": {"appId": "a", "version": 1, "lastUpdated": _now_ms()}}]
    )
    absent = g.metadata()
    del absent["metaData"]["schemaString"]
    g.write_commit(root, 2, [g.commit_info("SET TBLPROPERTIES"), absent])


def tracked_rows_ict_dv(root: Path) -> None:
    """Row tracking, deletion vectors, V2 checkpoints, in-commit timestamps and clustering in one
    table: created and written by our engine, upgraded by a hand-written protocol commit."""
    from txntable.engine.table import Table

    properties = {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"}
    table = Table.create(
        str(root), pa.schema([("x", pa.int64()), ("y", pa.string())]), (), properties
    )
    table.append(pa.table({"x": pa.array([1, 2, 3], pa.int64()), "y": ["a", "b", "c"]}))
    snapshot = table.snapshot()
    features = sorted(
        {
            *(snapshot.protocol.writer_features or ()),
            "v2Checkpoint",
            "inCommitTimestamp",
            "clustering",
        }
    )
    readers = sorted({*(snapshot.protocol.reader_features or ()), "v2Checkpoint"})
    meta = snapshot.metadata.to_json()
    ict = _now_ms()
    meta["configuration"] = {
        **meta["configuration"],
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": str(snapshot.version + 1),
        "delta.inCommitTimestampEnablementTimestamp": str(ict),
    }
    upgrade = [
        g.commit_info("SET TBLPROPERTIES", inCommitTimestamp=ict),
        g.protocol(3, 7, readerFeatures=readers, writerFeatures=features),
        {"metaData": meta},
        domain(CLUSTERING, '{"clusteringColumns":[["x"]]}'),
    ]
    g.write_commit(root, snapshot.version + 1, upgrade)
    table.append(pa.table({"x": pa.array([4, 5], pa.int64()), "y": ["d", None]}))
    table.delete("x = 2")
    table.append(pa.table({"x": pa.array([6], pa.int64()), "y": ["f"]}))


def unknown_writer_feature(root: Path) -> None:
    protocol = g.protocol(1, 7, writerFeatures=["someFutureFeature", "appendOnly"])
    create(root, protocol, [field("id", "long")])
    for v in range(1, 3):
        append(root, v, f"f{v}.parquet", pa.table({"id": pa.array([v], pa.int64())}))


BUILDERS: dict[str, Callable[[Path], None]] = {
    "column_mapping_name": column_mapping_name,
    "column_mapping_id": column_mapping_id,
    "variant_preview": variant_preview,
    "iceberg_v2": iceberg_v2,
    "iceberg_v1": iceberg_v1,
    "iceberg_v2_without_mapping": iceberg_v2_without_mapping,
    "collations": collations,
    "collations_preview": collations_preview,
    "liquid": liquid,
    "materialized_partitions": materialized_partitions,
    "checkpoint_protection": checkpoint_protection,
    "type_widening": type_widening,
    "int96_edges": int96_edges,
    "empty_schema": empty_schema,
    "tracked_rows_ict_dv": tracked_rows_ict_dv,
    "unknown_writer_feature": unknown_writer_feature,
}

#: what OPTIMIZE must refuse (with the feature or rule named); every other table it rewrites
NOT_REWRITABLE = {
    "iceberg_v2_without_mapping": "column mapping must be in name or id mode",
    "unknown_writer_feature": "someFutureFeature",
}
#: what every maintenance step refuses
UNMAINTAINABLE = {"unknown_writer_feature": "someFutureFeature"}


def build(name: str, root: Path) -> Path:
    BUILDERS[name](root)
    return root
