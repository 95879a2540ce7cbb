"""Z-order of a partition larger than one task may load, over Spark tasks (local[2]).

``max_task_input_bytes`` is a real guard: a task refuses to load more input bytes than that.
The one-task path fails on such a partition, loudly and changing nothing; the distributed path
(``maintenance/zorder_spark.py``) rewrites it with no task over the limit. deltalake (through
``tests/oracle_read.py``) reads the same rows before and after; the files it writes cluster
about as well as the one-task Z-order's (the share of files a point lookup reads, from their
statistics, as test_optimize_clustering measures it); row ids survive, and a column-mapped
table keeps its field ids.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.row_tracking_support import delete_rows, with_deletion_vectors
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.commit import row_tracking as rt
from txntable.engine.table import Table
from txntable.maintenance.errors import BinExecutionError
from txntable.maintenance.executor_arrow import ArrowExecutor, BinIO
from txntable.maintenance.executor_spark import SparkExecutor
from txntable.maintenance.optimize import optimize, plan
from txntable.maintenance.planner import ZORDER_TAG
from txntable.maintenance.zorder_spark import (
    RANGE_SHARE_OF_LIMIT,
    _leftovers,
    plan_ranges,
    sample_inputs,
    split_inputs,
    write_range,
)

pytestmark = pytest.mark.integration

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("x", pa.int64()),
        ("d", pa.date32()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("st", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])),
    ]
)


def rows(rng: random.Random, start: int, n: int, partition: str) -> pa.Table:
    day0 = dt.date(2020, 1, 1)
    out: list[dict[str, Any]] = [
        {
            "id": k,
            "p": partition,
            "x": None if k % 23 == 0 else rng.randrange(1_000_000),
            "d": day0 + dt.timedelta(days=rng.randrange(1500)),
            "s": f"s{rng.randrange(10_000):05d}",
            "ts": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=k),
            "st": {"a": k % 100, "b": [f"v{k}", None]},
        }
        for k in range(start, start + n)
    ]
    return pa.Table.from_pylist(out, schema=SCHEMA)


def two_partitions(path: Path, big: int = 24, small: int = 3, n: int = 400) -> Table:
    """Partition ``big`` of ``big`` random appends and partition ``small`` of a few."""
    table = Table.create(str(path), SCHEMA, ["p"])
    rng = random.Random(11)
    for i in range(big):
        table.append(rows(rng, i * n, n, "big"))
    for i in range(small):
        table.append(rows(rng, 1_000_000 + i * n, n, "small"))
    return table


def partition_files(table: Table, partition: str) -> list[Any]:
    return [a for a in table.snapshot().add_actions() if a.partition_values["p"] == partition]


def lookup_share(adds: list[Any], column: str, probes: list[Any]) -> float:
    """Mean share of files whose [min, max] of ``column`` holds a probed value: what a point
    lookup reads after data skipping (1.0: skipping prunes nothing)."""
    ranges = []
    for add in adds:
        stats = json.loads(add.stats or "{}")
        ranges.append((stats["minValues"][column], stats["maxValues"][column]))
    hits = sum(1 for v in probes for lo, hi in ranges if lo <= v <= hi)
    return hits / (len(probes) * len(ranges))


def data_files(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*.parquet")}


@pytest.mark.spark
def test_partition_over_the_task_limit_runs_distributed(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "t"
    table = two_partitions(path)
    copy = tmp_path / "single"
    shutil.copytree(path, copy)
    big = partition_files(table, "big")
    big_bytes = sum(a.size for a in big)
    limit = big_bytes // 4  # the big partition is 4x what one task may load
    files = math.ceil(big_bytes / (limit * RANGE_SHARE_OF_LIMIT))  # ranges planned for the limit
    target = big_bytes // files + 1  # the one-task path writes as many files
    policy = OptimizeOptions(z_order_by=("x", "d"), target_file_size=target)
    before = oracle_read.read(path)
    version = table.snapshot().version

    # one task per bin: the big partition's bin refuses to load and changes nothing
    old = SparkExecutor(spark=spark, max_task_input_bytes=limit, distribute_zorder_above=None)
    failed = optimize(Table.open(str(path)), policy, old)
    assert failed.bins_committed == 1 and failed.bins_skipped == 1, failed.to_json()
    reason = failed.skipped[0]["reason"]
    assert "over the per-task limit max_task_input_bytes" in reason, reason
    assert {a.path for a in partition_files(Table.open(str(path)), "big")} == {a.path for a in big}
    assert len(data_files(path / "p=big")) == len(big)  # nothing left behind
    assert oracle_read.read(path)["digest"] == before["digest"]

    # distributed: same limit, the bin is read, range-partitioned and written over tasks
    new = SparkExecutor(spark=spark, max_task_input_bytes=limit)
    result = optimize(Table.open(str(path)), policy, new)
    assert result.error is None and result.bins_committed == 1, result.to_json()
    assert result.version == version + 2 and result.num_files_removed == len(big)
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    written = partition_files(Table.open(str(path)), "big")
    assert len(written) == files == len(data_files(path / "p=big")) - len(big)
    assert all(a.size < limit for a in written)
    assert all(json.loads(a.tags[ZORDER_TAG]) == ["x", "d"] for a in written)
    # the ranges were cut evenly: no file holds much more than its share of the rows
    records = [json.loads(a.stats)["numRecords"] for a in written]
    assert max(records) < 1.5 * sum(records) / len(records), records

    # clustering about as good as the one-task Z-order of the same partition
    single = optimize(Table.open(str(copy)), policy, ArrowExecutor())
    assert single.error is None and single.bins_committed == 2
    ones = partition_files(Table.open(str(copy)), "big")
    rng = random.Random(5)
    x_probes = [rng.randrange(1_000_000) for _ in range(200)]
    d_probes = [
        str(dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(1500))) for _ in range(200)
    ]
    shares = {
        "x": (lookup_share(big, "x", x_probes), lookup_share(ones, "x", x_probes)),
        "d": (lookup_share(big, "d", d_probes), lookup_share(ones, "d", d_probes)),
    }
    shares_new = {
        "x": lookup_share(written, "x", x_probes),
        "d": lookup_share(written, "d", d_probes),
    }
    print(f"point-lookup share (before, one task, distributed): {shares} {shares_new}")
    for column, (before_share, one_task) in shares.items():
        assert before_share > 0.9
        assert shares_new[column] <= one_task + 0.1, (column, shares_new, one_task)


@pytest.mark.spark
def test_row_ids_and_deletion_vectors_survive(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "t"
    table = Table.create(str(path), SCHEMA, [], {"delta.enableRowTracking": "true"})
    with_deletion_vectors(table)
    rng = random.Random(3)
    for i in range(8):
        table.append(rows(rng, i * 200, 200, "one"))
    paths = sorted(a.path for a in table.snapshot().add_actions())
    delete_rows(table, paths[0], [0, 5, 199])
    delete_rows(table, paths[3], [17])
    stable = rt.stable_row_ids(table.snapshot(), ["id"]).to_pylist()
    before, read_before = sorted(map(json.dumps, stable)), oracle_read.read(path)
    assert len(before) == 1600 - 4

    executor = SparkExecutor(spark=spark, distribute_zorder_above=0)  # every Z-order bin
    policy = OptimizeOptions(z_order_by=("s",), target_file_size=8 * 1024)
    result = optimize(table, policy, executor)
    assert result.error is None and result.bins_committed == 1, result.to_json()
    assert result.num_files_added > 1
    after = sorted(map(json.dumps, rt.stable_row_ids(table.snapshot(), ["id"]).to_pylist()))
    assert after == before
    read_after = oracle_read.read(path)
    assert (read_after["rows"], read_after["digest"]) == (
        read_before["rows"],
        read_before["digest"],
    )


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_table(tmp_path: Path, spark: Any, mode: str) -> None:
    from deltalake import write_deltalake

    path = tmp_path / "t"
    rng = random.Random(5)
    schema = pa.schema([("id", pa.int64()), ("x value", pa.int64()), ("s", pa.string())])
    for i in range(8):
        data = [
            {"id": k, "x value": rng.randrange(100_000), "s": f"s{rng.randrange(1000):04d}"}
            for k in range(i * 150, (i + 1) * 150)
        ]
        write_deltalake(
            str(path),
            pa.Table.from_pylist(data, schema=schema),
            mode="append",
            configuration={"delta.columnMapping.mode": mode} if i == 0 else None,
        )
    table = Table.open(str(path))
    fields = {f.name: f for f in table.snapshot().fields}
    assert fields["x value"].physical_name != "x value"  # really mapped
    before = oracle_read.read(path)
    executor = SparkExecutor(spark=spark, distribute_zorder_above=0)
    policy = OptimizeOptions(z_order_by=("x value", "s"), target_file_size=2 * 1024)
    result = optimize(table, policy, executor)
    assert result.error is None and result.bins_committed == 1, result.to_json()
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    snapshot = Table.open(str(path)).snapshot()
    assert snapshot.num_files == result.num_files_added > 1
    physical = fields["x value"].physical_name
    for uri in snapshot.file_uris():
        file_schema = pq.read_schema(uri.removeprefix("file://"))
        assert physical in file_schema.names
        if mode == "id":  # the Parquet field ids travelled with the rows
            field_id = file_schema.field(physical).metadata[b"PARQUET:field_id"]
            assert int(field_id) == fields["x value"].metadata["delta.columnMapping.id"]


@pytest.mark.spark
def test_a_failing_distributed_bin_changes_nothing(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "t"
    table = two_partitions(path, big=6, small=0, n=100)
    version = table.snapshot().version
    lost = partition_files(table, "big")[2]
    (path / lost.path).unlink()  # an input the log still names is gone
    files_left = data_files(path / "p=big")
    executor = SparkExecutor(spark=spark, distribute_zorder_above=0)
    result = optimize(table, OptimizeOptions(z_order_by=("x",)), executor)
    assert result.bins_committed == 0 and result.error is not None
    reason = result.skipped[0]["reason"]
    assert reason.startswith("rewrite failed: distributed Z-order failed: ") and "\n" not in reason
    assert "FileNotFoundError" in reason or "No such file" in reason, reason
    assert Table.open(str(path)).snapshot().version == version
    assert data_files(path / "p=big") == files_left


def test_arrow_executor_refuses_a_bin_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = two_partitions(path, big=4, small=0, n=100)
    version = table.snapshot().version
    executor = ArrowExecutor(max_task_input_bytes=1000)
    result = optimize(table, OptimizeOptions(z_order_by=("x",)), executor)
    assert result.bins_committed == 0 and result.error is not None
    assert "max_task_input_bytes=1000" in result.skipped[0]["reason"]
    assert Table.open(str(path)).snapshot().version == version
    assert len(data_files(path / "p=big")) == 4


def _task_of(table: Table, zorder_by: tuple[str, ...] = ("x",)) -> Any:
    from txntable.maintenance.optimize import _Run

    run = _Run(
        table,
        table.snapshot(),
        OptimizeOptions(z_order_by=zorder_by),
        ArrowExecutor(),
        storage_options={},
        commit_options=None,
        start_ms=0,
    )
    bins = [b for b in plan(table, OptimizeOptions(z_order_by=zorder_by)).bins]
    return run.task(bins[0])


def test_range_task_stops_receiving_over_the_limit_and_ranges_fit_it(tmp_path: Path) -> None:
    """Without Spark: the planning and write steps' guards, on a real table's bin."""
    table = two_partitions(tmp_path / "t", big=4, small=0, n=200)
    task = _task_of(table)
    samples = list(sample_inputs(task, range(len(task.inputs)), 50, None))
    assert sum(n for n, _ in samples) == 800
    limit = task.input_bytes // 3
    the_plan = plan_ranges(task, samples, ("x",), limit)
    assert the_plan is not None
    assert the_plan.ranges == math.ceil(task.input_bytes / (limit * RANGE_SHARE_OF_LIMIT))
    assert len(the_plan.splits) == the_plan.ranges - 1

    # one range holding every row: a third of them already passes the limit
    squeezed = replace(the_plan, splits=(), ranges=1)
    everything = list(split_inputs(task, range(len(task.inputs)), squeezed))
    assert {r for r, _ in everything} == {0}
    with pytest.raises(BinExecutionError, match=r"key range 0 of bin .* over the per-task limit"):
        list(write_range(task, squeezed, 0, everything))
    assert len(data_files(tmp_path / "t" / "p=big")) == 4  # refused before writing

    # no live rows: nothing to plan, the inputs just go
    assert plan_ranges(task, [(0, b) for _, b in samples], ("x",), None) is None


def test_leftovers_of_a_failed_run_are_found_by_name(tmp_path: Path) -> None:
    table = two_partitions(tmp_path / "t", big=2, small=0, n=50)
    task = _task_of(table)
    samples = list(sample_inputs(task, range(len(task.inputs)), 50, None))
    the_plan = plan_ranges(task, samples, ("x",), None)
    assert the_plan is not None
    directory = tmp_path / "t" / "p=big"
    for index in (0, 3):
        (directory / the_plan.file_name(index)).write_bytes(b"partial")
    (directory / "part-00003-someone-else.c000.zstd.parquet").write_bytes(b"not ours")
    found = _leftovers(BinIO(task), the_plan)
    assert sorted(found) == sorted(f"p=big/{the_plan.file_name(i)}" for i in (0, 3))


@pytest.mark.spark
def test_clustered_table_is_clustered_distributed(tmp_path: Path, spark: Any) -> None:
    from tests.support.clustered_tables import clustered_table, log_lines
    from txntable.maintenance.clustering import LIQUID

    path = tmp_path / "t"
    table = clustered_table(path, [["x"], ["d"]], commits=8, rows=200)
    before = oracle_read.read(path)
    executor = SparkExecutor(spark=spark, distribute_zorder_above=0)
    result = optimize(table, OptimizeOptions(target_file_size=8 * 1024), executor)
    assert result.error is None and result.bins_committed == 1, result.to_json()
    adds = [line["add"] for line in log_lines(path, result.version) if "add" in line]
    assert len(adds) > 1 and all(a["clusteringProvider"] == LIQUID for a in adds)
    # one run's names (part-<range>-<run uuid>...): the distributed path wrote them
    assert len({a["path"].split("-", 2)[2] for a in adds}) == 1
    assert oracle_read.read(path)["digest"] == before["digest"]
