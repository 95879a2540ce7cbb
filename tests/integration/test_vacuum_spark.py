"""VACUUM as Spark tasks (local[2]) deletes exactly what in-process VACUUM deletes.

Every test vacuums two copies of one table (``copytree`` keeps modification times): one in this
process, one with ``SparkSweeper`` on the session-wide fixture. Dry runs list the same files,
real runs leave the same files behind, and deltalake reads the Spark-vacuumed table as before.
The tables hold what VACUUM must tell apart: files removed by OPTIMIZE, live files, deletion
vectors (kept by UUID wherever they lie), hidden files and directories at every level, young
orphans, the log, and files directly in the root. Also: the same on S3 (moto), the delete tasks'
own check, ``txntable vacuum --executor spark`` and the optimize job above its threshold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import oracle_read
from tests.integration.optimize_helpers import fragmented_table
from tests.support.s3_moto import _batch, _new_table, _options
from txntable.api.optimize_options import OptimizeOptions
from txntable.cli.main import main as cli
from txntable.engine.storage.base import LocalStorage
from txntable.engine.table import Table
from txntable.engine.vacuum import VacuumRules, vacuum
from txntable.maintenance.errors import MaintenanceError
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.maintenance.vacuum_spark import SparkSweeper, delete_chunks

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DAY_MS = 86_400_000
OLD = time.time() - 30 * 86400

#: planted file -> aged 30 days (False: written now, so inside any retention)
PLANTED = {
    "orphan-root.parquet": True,
    "young-orphan.parquet": False,
    "_SUCCESS": True,
    ".hidden-root.crc": True,
    "_delta_log/junk.txt": True,
    "_tmp/inner.parquet": True,
    ".staging/x.parquet": True,
    "_change_data/cdc-old.parquet": True,
    "zz/deletion_vector_{new}.bin": True,
    "zz/nested/deep-orphan.parquet": True,
    "zz/_hidden/deep.parquet": True,
}


def _plant(path: Path, partition_dir: str) -> None:
    planted = dict(PLANTED)
    planted.update(
        {
            f"{partition_dir}/orphan-old.parquet": True,
            f"{partition_dir}/young.parquet": False,
            f"{partition_dir}/.part-0.crc": True,
            f"{partition_dir}/_committed_0": True,
            f"{partition_dir}/sub/_tmp/x.parquet": True,
            f"{partition_dir}/sub/nested-old.parquet": True,
        }
    )
    for name, aged in planted.items():
        target = path / name.format(new=uuid.uuid4())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * 7)
        if aged:
            os.utime(target, (OLD, OLD))


def _files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def _twins(path: Path, tag: str) -> tuple[Path, Path]:
    a, b = path.with_name(f"{path.name}-{tag}-process"), path.with_name(f"{path.name}-{tag}-spark")
    shutil.copytree(path, a)
    shutil.copytree(path, b)
    return a, b


def _compare(
    path: Path, spark: Any, tag: str, **kwargs: Any
) -> tuple[set[str], Path, SparkSweeper]:
    """Vacuum twins of ``path`` both ways and assert the same outcome: the deleted set, the
    Spark-vacuumed twin and the sweeper."""
    ours, theirs = _twins(path, tag)
    sweeper = SparkSweeper(spark=spark)
    dry_process = vacuum(Table.open(str(ours)).snapshot(), dry_run=True, **kwargs)
    dry_spark = vacuum(Table.open(str(theirs)).snapshot(), dry_run=True, sweeper=sweeper, **kwargs)
    assert dry_spark.executor == "spark" and dry_process.executor == "process"
    assert dry_spark.files == dry_process.files
    assert dry_spark.bytes == dry_process.bytes
    assert _files(ours) == _files(theirs)  # a dry run deletes nothing
    done_process = vacuum(Table.open(str(ours)).snapshot(), **kwargs)
    done_spark = vacuum(Table.open(str(theirs)).snapshot(), sweeper=sweeper, **kwargs)
    assert done_spark.files == done_process.files == dry_process.files
    assert done_spark.num_deleted == len(done_spark.files)
    assert _files(ours) == _files(theirs)
    assert not set(done_spark.files) & _files(theirs)
    ops = [c["operation"] for c in Table.open(str(theirs)).history(2)]
    assert ops == ["VACUUM END", "VACUUM START"]
    return set(done_spark.files), theirs, sweeper


def test_partitioned_table_after_optimize(tmp_path: Path, spark: Any) -> None:
    path = fragmented_table(tmp_path / "t", commits=6, rows=30, partitioned=True)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed > 0
    partition_dir = next(p.name for p in path.iterdir() if p.name.startswith("p="))
    _plant(path, partition_dir)
    before = oracle_read.read(path)

    # 7-day retention, log young: only the old orphans go
    deleted, _, sweeper = _compare(path, spark, "now")
    assert deleted == {
        "orphan-root.parquet",
        "_change_data/cdc-old.parquet",
        f"{partition_dir}/orphan-old.parquet",
        f"{partition_dir}/sub/nested-old.parquet",
        "zz/nested/deep-orphan.parquet",
    } | {f for f in _files(path) if f.startswith("zz/deletion_vector_")}
    assert sweeper.last["listTasks"] >= 2 and sweeper.last["directories"] >= 5

    # eight days later: OPTIMIZE's inputs and the young orphans go too, live files stay
    live = set(Table.open(str(path)).snapshot().files()["path"].to_pylist())
    later = int(time.time() * 1000) + 8 * DAY_MS
    deleted, vacuumed, _ = _compare(path, spark, "later", now_ms=later)
    assert len(deleted) == result.num_files_removed + 8
    assert live <= _files(vacuumed) and not deleted & live
    assert not {f for f in deleted if f.startswith(("_delta_log", "_tmp", ".", "_SUCCESS"))}
    after = oracle_read.read(vacuumed)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])


@pytest.mark.parametrize("name", ["table-with-dv-small", "partitioned-table-with-dv-large"])
def test_deletion_vectors_are_kept_by_uuid_wherever_they_lie(
    table_copy: Any, spark: Any, name: str
) -> None:
    path = table_copy(name)
    live_dvs = {f for f in _files(path) if "deletion_vector_" in f}
    assert live_dvs
    ident = live_dvs.pop().rsplit("deletion_vector_", 1)[1]
    planted = {
        f"ab/deletion_vector_{ident}": "kept: its UUID is referenced",
        f"ab/deletion_vector_{uuid.uuid4()}.bin": "deleted",
        f"cd/x%prefix-deletion_vector_{uuid.uuid4()}.bin": "deleted",
    }
    for rel in planted:
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(b"dv")
        os.utime(path / rel, (OLD, OLD))
    readable = name == "table-with-dv-small"
    before = oracle_read.read(path) if readable else None
    deleted, vacuumed, _ = _compare(path, spark, "zero", retention_ms=0, force=True)
    for rel, fate in planted.items():
        assert (rel in deleted) == (fate == "deleted"), rel
    still = _files(vacuumed)
    assert {f for f in _files(path) if "deletion_vector_" in f and "/" not in f} <= still
    if readable:
        assert before is not None
        after = oracle_read.read(vacuumed)
        assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])


def test_a_delete_task_refuses_names_outside_the_rules(tmp_path: Path, spark: Any) -> None:
    (tmp_path / "_delta_log").mkdir()
    keep = tmp_path / "_delta_log" / "00000000000000000000.json"
    keep.write_text("{}")
    common = {"location": str(tmp_path), "storage_options": {}, "partition_names": []}
    for bad in ("_delta_log/00000000000000000000.json", "../x", "/etc/passwd", "a/./b", ".x"):
        with pytest.raises(MaintenanceError, match="refusing to delete"):
            delete_chunks([["fine.parquet", bad]], common)
    assert keep.exists()
    scope = VacuumRules(0, ("_p",), frozenset(), frozenset())
    assert scope.in_scope("_p=1/part-0.parquet") and not scope.in_scope("_q=1/part-0.parquet")
    # through Spark: the task's error reaches the caller as one readable line
    with pytest.raises(MaintenanceError, match=r"delete job failed: .*refusing to delete '\.\./x'"):
        SparkSweeper(spark=spark).delete(LocalStorage(str(tmp_path)), ["../x"], scope)


def test_cli_executor_spark(tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``txntable vacuum --executor spark`` uses the session already running in the process
    (the fixture's) and leaves it running."""
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=True)
    _plant(path, next(p.name for p in path.iterdir() if p.name.startswith("p=")))
    assert cli(["vacuum", str(path), "--dry-run", "--json"]) == 0
    process = json.loads(capsys.readouterr().out)
    assert cli(["vacuum", str(path), "--executor", "spark", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["executor"] == "spark" and done["files"] == process["files"]
    assert done["numDeleted"] == 6
    assert spark.sparkContext.parallelize([1]).count() == 1  # not stopped


def test_memory_tables_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    table = f"memory://vacuum-spark-{uuid.uuid4()}"
    fragmented = Table.create(table, _schema())
    assert fragmented.snapshot().version == 0
    assert cli(["vacuum", table, "--executor", "spark"]) == 1
    assert "one process" in capsys.readouterr().err


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.int64())])


def test_optimize_job_vacuums_on_spark_above_the_threshold(tmp_path: Path) -> None:
    """The controller's job: compaction, then VACUUM in the same Spark session when the log knows
    at least --vacuum-spark-min-files files (here 1, so this small table qualifies)."""
    path = fragmented_table(tmp_path / "t", commits=4, rows=20, partitioned=True)
    partition_dir = next(p.name for p in path.iterdir() if p.name.startswith("p="))
    _plant(path, partition_dir)
    before = oracle_read.read(path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "txntable.jobs.optimize",
            str(path),
            "--master",
            "local[1]",
            "--vacuum",
            "--vacuum-spark-min-files",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
    vac = doc["vacuum"]
    assert vac["executor"] == "spark" and vac["logged"] and vac["numDeleted"] == 6
    assert f"{partition_dir}/orphan-old.parquet" in vac["files"]
    assert oracle_read.read(path)["digest"] == before["digest"]


def test_s3_table_on_spark_deletes_what_in_process_deletes(
    endpoint: str,
    spark: Any,
) -> None:
    """On S3 (moto's server, reached by the Spark workers over HTTP): the root is listed with a
    delimiter, each top-level prefix by a task; the same objects go as in-process."""
    uri, table = _new_table(endpoint)
    table.append(_batch([1, 2], "a"))
    table.append(_batch([3], "b"))
    table.delete("p = 'b'")  # p=b's file becomes a tombstone (young: kept at 7 days)
    for name in (
        "orphan-root.parquet",
        "p=a/orphan.parquet",
        "p=a/sub/deep.parquet",
        "p=a/_tmp/x.parquet",
        "_hidden/x.parquet",
        ".staging/y.parquet",
        "_delta_log/junk.txt",
        "zz/deletion_vector_00000000-0000-0000-0000-000000000000.bin",
    ):
        table.storage.write(name, b"x")
    options = _options(endpoint)
    snapshot = Table.open(uri, options).snapshot()
    later = int(time.time() * 1000) + 8 * DAY_MS
    sweeper = SparkSweeper(spark=spark, storage_options=options)
    process = vacuum(snapshot, dry_run=True, now_ms=later)
    dry = vacuum(snapshot, dry_run=True, now_ms=later, sweeper=sweeper)
    assert dry.files == process.files
    assert set(dry.files) == {
        "orphan-root.parquet",
        "p=a/orphan.parquet",
        "p=a/sub/deep.parquet",
        "zz/deletion_vector_00000000-0000-0000-0000-000000000000.bin",
    } | set(table.snapshot().tombstones().column("path").to_pylist())
    assert sweeper.last["directories"] == 3  # p=a, p=b, zz
    done = vacuum(snapshot, now_ms=later, sweeper=sweeper)
    assert done.num_deleted == len(process.files) and done.logged
    names = {f.name for f in table.storage.list_tree()}
    assert not names & set(process.files)
    live = set(Table.open(uri, options).snapshot().files().column("path").to_pylist())
    assert live | {"p=a/_tmp/x.parquet", "_hidden/x.parquet", ".staging/y.parquet"} <= names
