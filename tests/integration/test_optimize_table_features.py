"""OPTIMIZE on tables with collations, Iceberg compatibility, materialized partition columns and
the legacy ``liquid`` clustering name: what the files it writes hold, and what it refuses.

Before: every one of these tables was refused ("writer feature(s) this engine does not
support"), although a rewrite changes no row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests import feature_tables as ft
from tests import table_reads as tr
from tests.iceberg_metadata import IcebergWriter
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.errors import IcebergMetadataError, UnsupportedWriterFeatureError
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.table import Table
from txntable.engine.vacuum import InProcessSweeper, VacuumRules, vacuum
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

EVERYTHING = OptimizeOptions(target_file_size=1 << 30, min_file_size=1 << 30)
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


class _Recording(InProcessSweeper):
    """Lists and deletes as the in-process sweeper does, and records what it was told to
    delete: the files held for Iceberg are kept by the driver, whatever sweeper lists."""

    name = "recording"

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.deleted: list[str] = []

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        found = super().doomed(storage, rules)
        self.listed += [f.name for f in found]
        return found

    def delete(self, storage: Storage, names: Sequence[str], rules: VacuumRules) -> None:
        self.deleted += names
        super().delete(storage, names, rules)


_FORMATS = '"delta.universalFormat.enabledFormats":"iceberg",'


def _uniform(
    tmp_path: Path, enabled: bool = True, optimized: bool = True
) -> tuple[Path, list[str], IcebergWriter, int]:
    """An icebergCompatV2 table (UniForm on or off) whose Iceberg metadata reads its three
    files, after our OPTIMIZE replaced them (``optimized``), every data file old."""
    root = ft.build("iceberg_v2", tmp_path / "t")
    first = root / "_delta_log" / f"{0:020d}.json"
    text = first.read_text()
    assert _FORMATS in text
    if not enabled:
        first.write_text(text.replace(_FORMATS, ""))
    (root / "metadata" / "v1.metadata.json").unlink()  # the builder's stand-in: no snapshot
    before = sorted(tr.load(root).files().column("path").to_pylist())
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    snapshot_id = iceberg.append(*before, delta_version=3)
    if optimized:
        result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
        assert result.error is None and result.num_files_removed == len(before) == 3
    old = 1_600_000_000
    for p in root.glob("col-p=x/*.parquet"):
        os.utime(p, (old, old))
    return root, before, iceberg, snapshot_id


def test_vacuum_keeps_the_files_the_current_iceberg_snapshot_reads(tmp_path: Path) -> None:
    root, before, iceberg, snapshot_id = _uniform(tmp_path)
    dry = vacuum(tr.load(root), retention_ms=0, force=True, dry_run=True)
    assert dry.iceberg is not None and list(dry.iceberg.files) == before
    assert not set(before) & set(dry.files)
    sweeper = _Recording()
    result = vacuum(tr.load(root), retention_ms=0, force=True, sweeper=sweeper)
    assert set(before) <= set(sweeper.listed)  # old and unreferenced by Delta: listed to go
    assert not set(before) & set(sweeper.deleted) and not set(before) & set(result.files)
    assert all((root / name).is_file() for name in before)
    assert result.iceberg is not None
    assert result.iceberg.metadata_files == (iceberg.metadata_file,)
    assert result.iceberg.snapshot_ids == (snapshot_id,)
    assert result.iceberg.delta_versions == (3,)
    doc = result.to_json()["iceberg"]
    assert doc["numHeld"] == 3 and doc["heldBytes"] == sum(
        (root / name).stat().st_size for name in before
    )
    # once Delta's converter has caught up (our OPTIMIZE in the new snapshot), nothing is held
    now = sorted(tr.load(root).files().column("path").to_pylist())
    iceberg.replace(before, now, delta_version=4)
    result = vacuum(tr.load(root), retention_ms=0, force=True)
    assert result.iceberg is not None and result.iceberg.files == ()
    assert set(before) <= set(result.files)
    assert not any((root / name).exists() for name in before)


def test_a_compaction_run_with_vacuum_reports_the_files_it_kept(tmp_path: Path) -> None:
    """The optimize job as the controller launches it (``--vacuum``, the table's retention,
    here none): OPTIMIZE replaces the files the Iceberg snapshot reads, VACUUM keeps them, and
    the result line, which the controller records in the TxnTable's status, says so."""
    root, before, iceberg, snapshot_id = _uniform(tmp_path, optimized=False)
    first = root / "_delta_log" / f"{0:020d}.json"
    no_retention = '"delta.deletedFileRetentionDuration":"interval 0 seconds",'
    first.write_text(first.read_text().replace(_FORMATS, _FORMATS + no_retention))
    job = [sys.executable, "-m", "txntable.jobs.optimize", str(root), "--executor", "arrow"]
    done = subprocess.run(
        [*job, "--target-size", "1Gi", "--min-file-size", "1Gi", "--vacuum"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["numFilesRemoved"] == 3
    held = result["vacuum"]["iceberg"]
    assert held["numHeld"] == 3 and sorted(held["held"]) == before
    assert held["metadata"] == [iceberg.metadata_file] and held["snapshotIds"] == [snapshot_id]
    assert not set(before) & set(result["vacuum"]["files"])
    assert all((root / name).is_file() for name in before)


def test_with_uniform_off_vacuum_keeps_only_what_delta_reads(tmp_path: Path) -> None:
    """Nothing regenerates the Iceberg metadata of a table whose UniForm is off: VACUUM keeps
    what Delta's does (the metadata directory itself stays)."""
    root, before, _, _ = _uniform(tmp_path, enabled=False)
    result = vacuum(tr.load(root), retention_ms=0, force=True)
    assert result.iceberg is None and "iceberg" not in result.to_json()
    assert set(before) <= set(result.files)
    assert (root / "metadata").is_dir()


def test_unreadable_iceberg_metadata_stops_vacuum(tmp_path: Path) -> None:
    root, before, iceberg, _ = _uniform(tmp_path)
    (root / iceberg.metadata_file).write_text("{")
    log = sorted(p.name for p in (root / "_delta_log").iterdir())
    with pytest.raises(IcebergMetadataError, match="is not JSON"):
        vacuum(tr.load(root), retention_ms=0, force=True)
    assert all((root / name).is_file() for name in before)
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == log  # no VACUUM START


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
