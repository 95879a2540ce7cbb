"""The Spark checkpoint job writes what the inline writer writes, and Spark agrees on the hash.

Same table version, same clock: the Parquet content of every part must be equal (row order aside),
whether the state was reconstructed by our snapshot replay or by Spark tasks over the log. Tables
on S3 (moto) replay the same way (their Azure twin is in test_azure_azurite.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.conftest import REPO
from tests.support.checkpoint_interop import (
    _deltalake,
    _deltalake_table,
    _drop_commits_before,
    _ours,
    assert_replays_on_object_store,
)
from tests.support.s3_moto import BUCKET
from txntable.engine.checkpoint.spark_hash import murmur3_strings, partition_ids
from txntable.engine.checkpoint.write import write_checkpoint, write_checkpoint_state
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.jobs.checkpoint import main, reconstruct_state

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW = 1_900_000_000_000  # far enough ahead that only unexpired tombstones differ by table


def _rows(path: Path) -> list[str]:
    table = pq.read_table(path)
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def _copy(table_copy: Any, tmp_path: Path, name: str, suffix: str) -> Path:
    dest = tmp_path / f"{name}-{suffix}"
    if name == "deltalake":
        base = tmp_path / "base" / "dl"
        if not base.exists():
            _deltalake_table(tmp_path / "base")
        shutil.copytree(base, dest)
    else:
        table_copy(name).rename(dest)
    return dest


@pytest.mark.parametrize(
    ("name", "part_size"),
    [
        ("deltalake", 2),  # partitions with nulls, tombstones, txn, stats; multi-part
        ("latest_not_checkpointed", None),  # a Spark checkpoint plus a commit after it
        ("checkpoint-v2-table", None),  # a V2 checkpoint read by Spark
        ("table-with-dv-small", 1),  # deletion vectors in the key
    ],
)
def test_spark_job_writes_what_the_inline_writer_writes(
    spark: Any, table_copy: Any, tmp_path: Path, name: str, part_size: int | None
) -> None:
    inline_root = _copy(table_copy, tmp_path, name, "inline")
    spark_root = _copy(table_copy, tmp_path, name, "spark")
    inline = write_checkpoint(
        Snapshot.load(LocalStorage(str(inline_root))), part_size=part_size, now_ms=NOW - 1
    )
    storage = LocalStorage(str(spark_root))
    state = reconstruct_state(spark, storage)
    ours = write_checkpoint_state(storage, state, part_size=part_size, now_ms=NOW - 1)
    assert (ours.version, ours.parts, ours.files) == (inline.version, inline.parts, inline.files)
    assert (ours.size, ours.num_of_add_files) == (inline.size, inline.num_of_add_files)
    for file in ours.files:
        assert _rows(spark_root / "_delta_log" / file) == _rows(inline_root / "_delta_log" / file)
    if name == "deltalake":
        before = _deltalake(inline_root)
        _drop_commits_before(spark_root, ours.version)
        assert _deltalake(spark_root) == {**before}
        assert _ours(spark_root) == before


def test_spark_hash_is_ours(spark: Any) -> None:
    values = ["", "a", "abcd", "abcde", "p=é/part-0001.parquet", "日本/x", None, "x" * 77]
    df = spark.createDataFrame([(v,) for v in values], "s string")
    rows = df.selectExpr("hash(s) AS h", "pmod(hash(s), 7) AS p").collect()
    array = pa.array(values, pa.string())
    assert [r["h"] for r in rows] == murmur3_strings(array).to_pylist()
    assert [r["p"] for r in rows] == partition_ids(array, 7).to_pylist()


def test_job_command_prints_one_json_line(tmp_path: Path) -> None:
    root = _deltalake_table(tmp_path)
    before = _deltalake(root)
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    out = subprocess.run(
        [
            *(sys.executable, "-m", "txntable.jobs.checkpoint", str(root)),
            *("--master", "local[1]", "--cleanup", "--retention", "0 days", "--run-id", "r-1"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["version"] == before["version"] and doc["engine"] == "spark"
    assert doc["numOfAddFiles"] == len(before["files"]) and doc["runId"] == "r-1"
    assert doc["cleanup"]["checkpointVersion"] in (None, doc["version"])
    _drop_commits_before(root, doc["version"])
    assert _deltalake(root) == before


def test_job_refuses_bad_input_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error:")
    root = _deltalake_table(tmp_path)
    assert main([str(root), "--storage-option", "novalue"]) == 2
    assert main([str(root), "--part-size", "0"]) == 2
    assert main([str(root), "--cleanup", "--retention", "1 month"]) == 2
    assert not list((root / "_delta_log").glob("*.checkpoint*"))


def test_checkpoint_of_an_s3_table(spark: Any, endpoint: str) -> None:
    """The issue's reproduction: the job read the log with spark.read over s3a:// and failed
    with ClassNotFoundException: org.apache.hadoop.fs.s3a.S3AFileSystem."""
    import uuid

    from txntable.engine.table import Table

    options = {
        "AWS_ENDPOINT_URL": endpoint,
        **{"AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"},
        **{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
    }
    uri = f"s3://{BUCKET}/cp-{uuid.uuid4().hex[:8]}"
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    Table.create(uri, schema, ["p"], storage_options=options)

    def rows(ids: list[int], part: str) -> pa.Table:
        return pa.table({"id": ids, "p": [part] * len(ids)}, schema=schema)

    assert_replays_on_object_store(spark, uri, options, rows)
    seen = oracle_read.read(uri, storage_options=options)
    assert (seen["version"], seen["rows"]) == (4, 2)
