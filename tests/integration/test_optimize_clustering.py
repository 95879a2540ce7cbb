"""OPTIMIZE on liquid-clustered tables, with deltalake as the oracle for the rows.

deltalake cannot create clustered tables, so they are made as Delta makes them: a table created
by our engine, then one commit, written by hand as Spark's ``ALTER TABLE ... CLUSTER BY`` writes
it (our engine never writes system domains), that upgrades the protocol to the ``clustering``
writer feature and records the ``delta.clustering`` domain metadata, then many small appends of
random rows by our engine. OPTIMIZE
must cluster them (``clusteringProvider: liquid`` on every add, ``clusterBy`` in commitInfo),
leave the rows as they were, make data skipping on the clustering columns better (measured from
the per-file min/max statistics), keep large clustered files, and refuse a Z-order policy.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tests import oracle_read
from tests.support.clustered_tables import append_random, clustered_table, log_lines
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.table import Table
from txntable.maintenance.clustering import CLUSTERING_DOMAIN, LIQUID
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize, plan

pytestmark = pytest.mark.integration

KB = 1024


def file_ranges(table: Table, column: str) -> list[tuple[Any, Any]]:
    """Per live file, the (min, max) of ``column`` from its statistics."""
    out = []
    for add in table.snapshot().add_actions():
        stats = json.loads(add.stats or "{}")
        out.append((stats["minValues"][column], stats["maxValues"][column]))
    return out


def lookup_share(ranges: list[tuple[Any, Any]], probes: list[Any]) -> float:
    """Mean share of files whose [min, max] holds a probed value: what a point lookup on the
    column reads after data skipping (1.0: skipping prunes nothing)."""
    hits = sum(1 for v in probes for lo, hi in ranges if lo <= v <= hi)
    return float(hits) / (len(probes) * len(ranges))


def probes(table: Table, column: str, n: int = 200) -> list[Any]:
    values = [str(v) if isinstance(v, dt.date) else v for v in _column(table, column)]
    return random.Random(1).sample(values, n)


def _column(table: Table, column: str) -> list[Any]:
    files = [uri.removeprefix("file://") for uri in table.snapshot().file_uris()]
    values: list[Any] = (
        ds.dataset(files, format="parquet").to_table(columns=[column])[column].to_pylist()
    )
    return values


def test_optimize_clusters_by_the_clustering_columns(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = clustered_table(path, [["x"], ["d"]])
    before_rows = oracle_read.read(path)
    files_before = table.snapshot().num_files
    x_probes, d_probes = probes(table, "x"), probes(table, "d")
    x_before = lookup_share(file_ranges(table, "x"), x_probes)
    d_before = lookup_share(file_ranges(table, "d"), d_probes)

    policy = OptimizeOptions(target_file_size=16 * KB)
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1, result.to_json()
    assert result.num_files_removed == files_before

    lines = log_lines(path, result.version)
    adds = [line["add"] for line in lines if "add" in line]
    assert len(adds) >= 4
    assert all(a["clusteringProvider"] == LIQUID and a["dataChange"] is False for a in adds)
    info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["clusterBy"] == '["x", "d"]'
    assert info["operationParameters"]["zOrderBy"] == "[]"

    after_rows = oracle_read.read(path)
    assert (after_rows["rows"], after_rows["digest"]) == (
        before_rows["rows"],
        before_rows["digest"],
    )

    optimized = Table.open(str(path))
    x_after = lookup_share(file_ranges(optimized, "x"), x_probes)
    d_after = lookup_share(file_ranges(optimized, "d"), d_probes)
    print(
        f"point-lookup share of files: x {x_before:.2f} -> {x_after:.2f}, "
        f"d {d_before:.2f} -> {d_after:.2f} ({files_before} -> {len(adds)} files)"
    )
    assert x_before > 0.9 and d_before > 0.9  # random appends: every file spans everything
    assert x_after < 0.5 * x_before and d_after < 0.7 * d_before

    # nothing left to cluster: the second run plans nothing and commits nothing
    again = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert (again.bins_planned, again.commits, again.error) == (0, [], None)
    assert Table.open(str(path)).snapshot().version == result.version


def test_new_appends_are_clustered_and_large_clustered_files_kept(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = clustered_table(path, [["x"]], commits=12)
    first = optimize(table, OptimizeOptions(target_file_size=16 * KB), ArrowExecutor())
    assert first.error is None and first.bins_committed == 1
    clustered = {a.path for a in Table.open(str(path)).snapshot().add_actions()}
    append_random(table, commits=3, rows=100, seed=8)
    snapshot = table.snapshot()
    new = {a.path for a in snapshot.add_actions()} - clustered

    # with a tiny minimum size every clustered file counts as large: only the new files go
    keep_large = OptimizeOptions(target_file_size=16 * KB, min_file_size=1)
    bins = plan(table, keep_large).bins
    assert len(bins) == 1 and bins[0].clustered and set(bins[0].paths) == new
    # with the default minimum (the target) the small clustered files join the new ones
    default = plan(table, OptimizeOptions(target_file_size=1024 * KB)).bins
    assert len(default) == 1 and set(default[0].paths) == new | clustered

    before_rows = oracle_read.read(path)
    result = optimize(Table.open(str(path)), keep_large, ArrowExecutor())
    assert result.error is None and result.num_files_removed == len(new)
    live = {a.path: a for a in Table.open(str(path)).snapshot().add_actions()}
    assert clustered <= set(live)  # the large clustered files were not rewritten
    assert all(a.clustering_provider == LIQUID for a in live.values())
    assert oracle_read.read(path)["digest"] == before_rows["digest"]


def test_clustered_table_without_columns_is_compacted(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = clustered_table(path, [], commits=6, rows=50)
    before_rows = oracle_read.read(path)
    result = optimize(table, OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 6 and result.num_files_added == 1
    lines = log_lines(path, result.version)
    add = next(line["add"] for line in lines if "add" in line)
    assert add.get("clusteringProvider") is None
    info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
    assert info["operationParameters"]["clusterBy"] == "[]"
    assert oracle_read.read(path)["digest"] == before_rows["digest"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txntable.cli.main", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )


@pytest.mark.parametrize(
    ("columns", "args", "message"),
    [
        ([["x"]], ["--zorder-by", "x"], "cannot Z-order a clustered table"),
        ([["st", "a"]], [], "clustering column 'st.a' is a nested field"),
        ([["gone"]], [], "clustering column 'gone' (delta.clustering) is not in the table schema"),
    ],
)
def test_refusals_are_one_line_and_change_nothing(
    tmp_path: Path, columns: list[Any], args: list[str], message: str
) -> None:
    path = tmp_path / "t"
    clustered_table(path, columns, commits=3, rows=20)
    log_before = sorted(os.listdir(path / "_delta_log"))
    done = _cli("optimize", str(path), "--executor", "arrow", *args)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert sorted(os.listdir(path / "_delta_log")) == log_before


def test_inspect_shows_the_clustering_columns(tmp_path: Path) -> None:
    path = tmp_path / "t"
    clustered_table(path, [["x"], ["d"]], commits=2, rows=10)
    done = _cli("inspect", str(path))
    assert done.returncode == 0, done.stderr
    assert "clustering x, d" in done.stdout
    doc = json.loads(_cli("inspect", str(path), "--json").stdout)
    assert doc["clusteringColumns"] == ["x", "d"]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_table_is_clustered_by_physical_names(tmp_path: Path, mode: str) -> None:
    """deltalake writes a column-mapped table; the clustering domain names physical columns."""
    from deltalake import write_deltalake

    from txntable.engine.model.features import reader_features, writer_features

    path = tmp_path / "t"
    rng = random.Random(5)
    schema = pa.schema([("id", pa.int64()), ("x value", pa.int64()), ("s", pa.string())])
    for i in range(12):
        rows = [
            {"id": k, "x value": rng.randrange(100_000), "s": f"s{rng.randrange(1000):04d}"}
            for k in range(i * 100, (i + 1) * 100)
        ]
        write_deltalake(
            str(path),
            pa.Table.from_pylist(rows, schema=schema),
            mode="append",
            configuration={"delta.columnMapping.mode": mode} if i == 0 else None,
        )
    snapshot = Table.open(str(path)).snapshot()
    physical = {f.name: f.physical_name for f in snapshot.fields}
    assert physical["x value"] != "x value"  # really mapped
    old = snapshot.protocol
    protocol: dict[str, Any] = {
        "minReaderVersion": old.min_reader_version,
        "minWriterVersion": 7,
        "writerFeatures": sorted(writer_features(old) | {"domainMetadata", "clustering"}),
    }
    if old.min_reader_version == 3:
        protocol["readerFeatures"] = sorted(reader_features(old))
    columns = [[physical["x value"]], [physical["s"]]]
    domain = {
        "domain": CLUSTERING_DOMAIN,
        "configuration": json.dumps({"clusteringColumns": columns}),
        "removed": False,
    }
    info = {"timestamp": 1_700_000_000_000, "operation": "CLUSTER BY"}
    actions = [{"commitInfo": info}, {"protocol": protocol}, {"domainMetadata": domain}]
    with open(path / "_delta_log" / f"{snapshot.version + 1:020d}.json", "x") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")

    table = Table.open(str(path))
    before = oracle_read.read(path)
    probe_rng = random.Random(2)
    x_probes = [probe_rng.randrange(100_000) for _ in range(200)]  # the values are uniform
    x_before = lookup_share(file_ranges(table, physical["x value"]), x_probes)
    result = optimize(table, OptimizeOptions(target_file_size=4 * KB), ArrowExecutor())
    assert result.error is None and result.bins_committed == 1, result.to_json()
    lines = log_lines(path, result.version)
    adds = [line["add"] for line in lines if "add" in line]
    assert adds and all(a["clusteringProvider"] == LIQUID for a in adds)
    info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
    assert info["operationParameters"]["clusterBy"] == '["x value", "s"]'
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    x_after = lookup_share(file_ranges(Table.open(str(path)), physical["x value"]), x_probes)
    print(f"column mapping {mode}: x {x_before:.2f} -> {x_after:.2f} ({len(adds)} files)")
    assert x_before > 0.9 and x_after < 0.7 * x_before


@pytest.mark.spark
def test_spark_executor_clusters_too(tmp_path: Path, spark: Any) -> None:
    from txntable.maintenance.executor_spark import SparkExecutor

    path = tmp_path / "t"
    table = clustered_table(path, [["x"], ["d"]], commits=8, rows=200)
    before = oracle_read.read(path)
    executor = SparkExecutor(spark=spark)
    result = optimize(table, OptimizeOptions(target_file_size=8 * KB), executor)
    executor.close()  # a session passed in is not stopped
    assert result.error is None and result.executor == "spark" and result.bins_committed == 1
    adds = [line["add"] for line in log_lines(path, result.version) if "add" in line]
    assert len(adds) > 1 and all(a["clusteringProvider"] == LIQUID for a in adds)
    assert oracle_read.read(path)["digest"] == before["digest"]
