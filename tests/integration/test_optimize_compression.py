"""OPTIMIZE writes its files with the Parquet codec asked for (flag or policy), else the table's
``delta.parquet.compression.codec``, else zstd; deltalake reads the result identically, and an
invalid codec is refused before anything changes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.integration.optimize_helpers import fragmented_table
from txntable.engine.table import Table
from txntable.engine.write.parquet_options import CODEC_PROPERTY
from txntable.jobs.optimize import add_arguments, execute

pytestmark = pytest.mark.integration


def _run(path: Path, *flags: str) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    result, code = execute(parser.parse_args([str(path), "--executor", "arrow", *flags]))
    assert code == 0, result.error
    assert result.num_files_added > 0
    return result.to_json()


def _live_files(path: Path) -> list[Path]:
    files = Table.open(str(path)).snapshot().files().column("path").to_pylist()
    return [path / p for p in files]


def _footer_codecs(files: list[Path]) -> set[str]:
    codecs = set()
    for f in files:
        meta = pq.read_metadata(f)
        for r in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                codecs.add(meta.row_group(r).column(c).compression)
    return codecs


def _set_codec_property(path: Path, value: str) -> None:
    """Put the property in the first commit's metadata, as Spark or Databricks would have
    (deltalake 1.6.6 refuses to create a table with it, whatever its value)."""
    first = path / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines() if line]
    for action in actions:
        if "metaData" in action:
            action["metaData"].setdefault("configuration", {})[CODEC_PROPERTY] = value
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_zstd_files_that_deltalake_reads_identically(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=6, rows=40, partitioned=True)
    before = oracle_read.read(path)
    doc = _run(path, "--compression", "zstd", "--compression-level", "7")
    assert doc["parquet"] == {
        "codec": "zstd",
        "level": 7,
        "rowGroupRows": 1_048_576,
        "dictionary": "auto",
        "source": "requested",
    }
    files = _live_files(path)
    assert files and all(f.name.endswith(".c000.zstd.parquet") for f in files)
    assert _footer_codecs(files) == {"ZSTD"}
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    assert after["version"] == before["version"] + 1


@pytest.mark.parametrize(
    ("flags", "footer", "source"),
    [([], "GZIP", "table"), (["--compression", "snappy"], "SNAPPY", "requested")],
)
def test_the_table_property_decides_unless_a_flag_overrides_it(
    tmp_path: Path, flags: list[str], footer: str, source: str
) -> None:
    path = fragmented_table(tmp_path / "t", commits=4, rows=30, partitioned=False)
    _set_codec_property(path, "gzip")
    before = oracle_read.read(path)
    doc = _run(path, *flags)
    assert (doc["parquet"]["codec"], doc["parquet"]["source"]) == (footer.lower(), source)
    assert _footer_codecs(_live_files(path)) == {footer}
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])


def test_the_default_is_zstd(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=20, partitioned=False)
    doc = _run(path)
    assert (doc["parquet"]["codec"], doc["parquet"]["level"]) == ("zstd", 1)
    assert _footer_codecs(_live_files(path)) == {"ZSTD"}


@pytest.mark.parametrize(
    ("table_codec", "flags", "message"),
    [
        ("brotli", [], f"table property {CODEC_PROPERTY}: unknown Parquet compression codec "),
        (None, ["--compression", "lz4"], "use lz4_raw"),
        (None, ["--compression", "zstd", "--compression-level", "30"], "level 30 is out of range"),
        (None, ["--dictionary", "maybe"], "unknown dictionary mode 'maybe'"),
    ],
)
def test_an_invalid_setting_is_one_error_line_and_changes_nothing(
    tmp_path: Path, table_codec: str | None, flags: list[str], message: str
) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=False)
    if table_codec:
        _set_codec_property(path, table_codec)
    data_before = sorted(p.name for p in path.glob("*.parquet"))
    log_before = sorted(os.listdir(path / "_delta_log"))
    command = [sys.executable, "-m", "txntable.cli.main", "optimize", str(path)]
    done = subprocess.run(
        [*command, "--executor", "arrow", *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert sorted(os.listdir(path / "_delta_log")) == log_before
    assert sorted(p.name for p in path.glob("*.parquet")) == data_before


@pytest.mark.spark
def test_spark_tasks_write_with_the_runs_settings(tmp_path: Path, spark: Any) -> None:
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.maintenance.executor_spark import SparkExecutor
    from txntable.maintenance.optimize import optimize

    path = fragmented_table(tmp_path / "t", commits=4, rows=30, partitioned=True)
    before = oracle_read.read(path)
    executor = SparkExecutor(spark=spark)
    policy = OptimizeOptions(compression="gzip", compression_level=2)
    result = optimize(Table.open(str(path)), policy, executor)
    executor.close()  # a session passed in is not stopped
    assert result.error is None and result.executor == "spark" and result.bins_committed > 0
    assert _footer_codecs(_live_files(path)) == {"GZIP"}
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
