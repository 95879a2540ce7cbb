"""OPTIMIZE on tables with collations, Iceberg compatibility, materialized partition columns and
the legacy ``liquid`` clustering name: what the files it writes hold, and what it refuses.

Before: every one of these tables was refused ("writer feature(s) this engine does not
support"), although a rewrite changes no row.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests import feature_tables as ft
from tests import table_reads as tr
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.engine.table import Table
from txntable.engine.vacuum import vacuum
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.maintenance.planner import OptimizePolicy

pytestmark = pytest.mark.integration

EVERYTHING = OptimizePolicy(target_file_size=1 << 30, min_file_size=1 << 30)
ID = b"PARQUET:field_id"


def _optimized(name: str, tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    root = ft.build(name, tmp_path / name)
    rows = tr.rows(tr.load(root))
    result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1, result.skipped
    assert tr.rows(tr.load(root)) == rows
    return root, tr.load(root).files().to_pylist()


def _ids(field: object) -> int | None:
    meta = getattr(field, "metadata", None) or {}
    return int(meta[ID]) if ID in meta else None


def test_iceberg_compat_v2_files_meet_its_rules(tmp_path: Path) -> None:
    root, adds = _optimized("iceberg_v2", tmp_path)
    (add,) = adds
    schema = pq.read_schema(root / add["path"])
    # data columns, then the partition column, each with its column mapping id; the array's
    # element with its nested id
    assert schema.names == ["col-id", "col-tags", "col-p"]
    assert [_ids(f) for f in schema] == [1, 3, 2]
    assert _ids(schema.field("col-tags").type.value_field) == 10
    assert pq.read_table(root / add["path"]).column("col-p").to_pylist() == ["x"] * 6
    stats = json.loads(str(add["stats"]))
    assert stats["numRecords"] == 6 and "col-p" not in stats["nullCount"]
    assert add["deletionVector"] is None


def test_iceberg_compat_v1_materializes_partitions(tmp_path: Path) -> None:
    root, (add,) = _optimized("iceberg_v1", tmp_path)
    schema = pq.read_schema(root / str(add["path"]))
    assert schema.names == ["col-id", "col-p"] and [_ids(f) for f in schema] == [1, 2]


def test_iceberg_metadata_outlives_vacuum(tmp_path: Path) -> None:
    root, _ = _optimized("iceberg_v2", tmp_path)
    iceberg = root / "metadata" / "v1.metadata.json"
    old = 1_600_000_000
    os.utime(iceberg, (old, old))
    for p in root.glob("col-p=x/*.parquet"):
        os.utime(p, (old, old))
    result = vacuum(tr.load(root), retention_ms=0, force=True)
    assert iceberg.exists() and not any(f.startswith("metadata/") for f in result.files)


def test_iceberg_compat_rule_no_writer_can_meet_is_refused(tmp_path: Path) -> None:
    root = ft.build("iceberg_v2_without_mapping", tmp_path / "t")
    before = {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()}
    with pytest.raises(UnsupportedWriterFeatureError, match="icebergCompatV2 is active") as info:
        optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert "column mapping must be in name or id mode" in str(info.value)
    assert info.value.features == ("icebergCompatV2",)
    assert {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()} == before


def test_materialized_partition_columns(tmp_path: Path) -> None:
    root, (add,) = _optimized("materialized_partitions", tmp_path)
    written = pq.read_table(root / str(add["path"]))
    assert written.column_names == ["id", "d"]
    assert {str(v) for v in written.column("d").to_pylist()} == {"2024-05-01"}
    assert "d" not in json.loads(str(add["stats"]))["nullCount"]


@pytest.mark.parametrize("name", ["collations", "collations_preview"])
def test_collated_columns_keep_their_metadata_and_get_no_bounds(name: str, tmp_path: Path) -> None:
    before = tr.load(ft.build(name, tmp_path / "before"))
    root, (add,) = _optimized(name, tmp_path)
    after = tr.load(root)
    assert after.metadata.schema_string == before.metadata.schema_string
    assert after.domains["delta.collations"] == before.domains["delta.collations"]
    stats = json.loads(str(add["stats"]))
    # the binary order of "A" < "a" < "b" is not UTF8_LCASE's: no bound would be safe for it
    assert "name" not in stats.get("minValues", {}) and "name" not in stats.get("maxValues", {})
    assert stats["nullCount"]["name"] == 0 and stats["minValues"]["id"] == 0


def test_legacy_liquid_name_clusters(tmp_path: Path) -> None:
    root, adds = _optimized("liquid", tmp_path)
    assert {a["clusteringProvider"] for a in adds} == {"liquid"}
    latest = tr.load(root).version
    info = json.loads((root / "_delta_log" / f"{latest:020d}.json").read_text().splitlines()[0])
    assert json.loads(info["commitInfo"]["operationParameters"]["clusterBy"]) == ["x"]
