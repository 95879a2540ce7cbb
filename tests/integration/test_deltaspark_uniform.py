"""An Iceberg reader of a UniForm table reads the same rows after our OPTIMIZE and VACUUM
(issue 33, item 2; docs/adr/0010-uniform-vacuum-holds-iceberg-files.md).

delta-spark writes the table (``delta.universalFormat.enabledFormats=iceberg`` with
``icebergCompatV2`` and column mapping, partitioned, a few small appends); its Iceberg metadata
is written by ``tests.deltaspark.uniform``, a stand-in for Delta's converter (delta-spark's own,
the ``delta-iceberg`` module, is not in the Maven repository these machines reach), with
pyiceberg, where UniForm puts it and as UniForm converts versions. The Iceberg reader is
pyiceberg's ``StaticTable`` on the metadata file the catalog points at.

Then, as a user would: ``txntable optimize`` rewrites every file the Iceberg snapshot reads, and
``txntable vacuum`` at retention 0 keeps those files, says so, and deletes nothing the Iceberg
snapshot reads; the Iceberg reader reads the same snapshot and rows (before ADR 0010 VACUUM
deleted the files and the read failed: FileNotFoundError). At the table's next Delta commit the
converter catches up (our OPTIMIZE becomes part of the new Iceberg snapshot), and the next VACUUM
deletes what it held, with the Iceberg reader still reading every row.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import CLI, txntable
from tests.deltaspark.uniform import UniformStandIn
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark]

VACUUM_NOW = ["--retention", "interval 0 hours", "--force"]


def _rows(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["day"], r["v"]) for r in rows)


def _live(path: Path) -> set[str]:
    return {f for f in Table.open(str(path)).snapshot().files().column("path").to_pylist()}


def test_iceberg_reader_reads_the_same_rows_after_our_optimize_and_vacuum(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    path = tmp_path / "uniform"
    ref = f"delta.`{path}`"
    delta_spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, day STRING, v STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.enableIcebergCompatV2' = 'true', "
        "'delta.universalFormat.enabledFormats' = 'iceberg', 'delta.columnMapping.mode' = 'name')"
    )
    for i in range(4):
        delta_spark.sql(f"INSERT INTO {ref} VALUES ({i}, 'a', 'x{i}'), ({i + 10}, 'b', 'y{i}')")
    standin = UniformStandIn(path, tmp_path / "catalog")
    first = standin.convert()  # Delta's converter, after the table's last commit
    expected = _rows(delta_spark.read(path, want_rows=True)["rows"])
    assert len(expected) == 8
    snapshot_id, rows = standin.read()
    assert snapshot_id == first.snapshot_id and _rows(rows.to_pylist()) == expected
    referenced = standin.referenced()
    assert referenced == _live(path) and len(referenced) >= 4

    # our OPTIMIZE replaces every file the Iceberg snapshot reads; its metadata stays as it was
    optimized = txntable("optimize", str(path), "--executor", "arrow").doc
    assert optimized and optimized["numFilesRemoved"] == len(referenced)
    assert not referenced & _live(path)
    assert standin.current_metadata() == first.metadata_location

    # VACUUM at retention 0 keeps them: the Iceberg reader reads the same snapshot and rows,
    # delta-spark the latest version
    vacuumed = txntable("vacuum", str(path), *VACUUM_NOW).doc
    snapshot_id, rows = standin.read()  # main: FileNotFoundError, VACUUM deleted the files
    assert snapshot_id == first.snapshot_id
    assert _rows(rows.to_pylist()) == expected
    assert vacuumed is not None
    assert not referenced & set(vacuumed["files"])
    assert all((path / name).is_file() for name in referenced)
    assert _rows(delta_spark.read(path, want_rows=True)["rows"]) == expected

    # ... and says which files it kept and why, in its result and in its text
    metadata_file = first.metadata_location.removeprefix(f"file://{path}/")
    assert vacuumed["iceberg"]["metadata"] == [metadata_file]
    assert vacuumed["iceberg"]["snapshotIds"] == [first.snapshot_id]
    assert vacuumed["iceberg"]["deltaVersions"] == [first.delta_version]
    assert sorted(vacuumed["iceberg"]["held"]) == sorted(referenced)
    assert vacuumed["iceberg"]["numHeld"] == len(referenced)
    dry = subprocess.run(
        [str(CLI), "vacuum", str(path), *VACUUM_NOW, "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    ).stdout
    assert f"kept {len(referenced)} files" in dry and "current Iceberg metadata" in dry, dry

    # the table's next Delta commit: Delta regenerates the metadata from its last converted
    # version, our OPTIMIZE included, and the next VACUUM deletes what the last one held
    delta_spark.sql(f"INSERT INTO {ref} VALUES (100, 'a', 'z')")
    second = standin.convert()
    assert second.delta_version > first.delta_version and second.snapshot_id != first.snapshot_id
    expected = sorted([*expected, (100, "a", "z")])
    snapshot_id, rows = standin.read()
    assert snapshot_id == second.snapshot_id and _rows(rows.to_pylist()) == expected
    assert standin.referenced() == _live(path)
    again = txntable("vacuum", str(path), *VACUUM_NOW).doc
    assert again is not None
    assert again["iceberg"]["numHeld"] == 0 and again["iceberg"]["snapshotIds"] == [
        second.snapshot_id
    ]
    assert referenced <= set(again["files"])
    assert not any((path / name).exists() for name in referenced)
    snapshot_id, rows = standin.read()
    assert snapshot_id == second.snapshot_id and _rows(rows.to_pylist()) == expected
    assert _rows(delta_spark.read(path, want_rows=True)["rows"]) == expected
