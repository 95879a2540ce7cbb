"""Checkpoints across engines: deltalake reads ours, we read deltalake's and Spark's.

For every table: what deltalake reports before our checkpoint (version, files with sizes and
partition values, protocol, metadata) must be what deltalake reports after it, and what our reader
reports from the checkpoint alone, with every older commit deleted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conftest import TESTDATA
from tests.support.checkpoint_interop import (
    _deltalake,
    _deltalake_table,
    _drop_commits_before,
    _ours,
)
from txntable.cli.main import main
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage

pytestmark = pytest.mark.integration

#: Reference tables our engine may write to (others use features it refuses, tested elsewhere).
REFERENCE = [
    "simple_table",
    "simple_table_with_checkpoint",
    "latest_not_checkpointed",
    "with_checkpoint_no_last_checkpoint",
    "checkpoint_with_partitions",
    "delta-0.8.0",
    "delta-0.8.0-partitioned",
    "delta-0.8.0-null-partition",
    "table-with-dv-small",
]


@pytest.mark.parametrize("name", REFERENCE)
def test_deltalake_and_our_reader_read_our_checkpoint(name: str, table_copy: Any) -> None:
    root = table_copy(name)
    before = _deltalake(root)
    snapshot = Snapshot.load(LocalStorage(str(root)))
    result = write_checkpoint(snapshot)
    assert result.version == before["version"]
    assert _deltalake(root) == before
    _drop_commits_before(root, result.version)
    assert _ours(root) == before
    assert _deltalake(root) == before


def test_deltalake_table_with_txns_tombstones_and_stats(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    root = _deltalake_table(tmp_path)
    before = _deltalake(root)
    snapshot = Snapshot.load(LocalStorage(str(root)))
    assert snapshot.tombstones().num_rows > 0
    result = write_checkpoint(snapshot, part_size=3)
    assert result.parts is not None and result.parts > 1
    _drop_commits_before(root, result.version)
    assert _deltalake(root) == before
    assert DeltaTable(str(root)).transaction_version("stream-1") == 7
    again = Snapshot.load(LocalStorage(str(root)))
    assert _ours(root) == before
    assert again.txn_version("stream-1") == 7
    assert again.tombstones().num_rows == snapshot.tombstones().num_rows
    stats = dict(
        zip(*(snapshot.files().column(c).to_pylist() for c in ("path", "stats")), strict=True)
    )
    for path, text in zip(
        *(again.files().column(c).to_pylist() for c in ("path", "stats")), strict=True
    ):
        assert json.loads(text) == json.loads(stats[path])


def test_deltalake_reads_stats_as_struct(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    root = _deltalake_table(tmp_path)
    DeltaTable(str(root)).alter.set_table_properties(
        {
            "delta.checkpoint.writeStatsAsStruct": "true",
            "delta.checkpoint.writeStatsAsJson": "false",
        }
    )
    before = _deltalake(root)
    result = write_checkpoint(Snapshot.load(LocalStorage(str(root))))
    _drop_commits_before(root, result.version)
    assert _deltalake(root) == before
    adds = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True))
    assert pc.sum(adds.column("num_records")).as_py() == 4


def test_we_read_deltalakes_checkpoint(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    root = _deltalake_table(tmp_path)
    before = _deltalake(root)
    DeltaTable(str(root)).create_checkpoint()
    _drop_commits_before(root, before["version"])
    again = Snapshot.load(LocalStorage(str(root)))
    assert _ours(root) == before
    assert again.txn_version("stream-1") == 7


@pytest.mark.parametrize(
    "name",
    [
        "simple_table_with_checkpoint",
        "latest_not_checkpointed",
        "checkpoint_with_partitions",
        "checkpoint-v2-table",
    ],
)
def test_we_read_spark_and_delta_rs_reference_checkpoints(name: str, table_copy: Any) -> None:
    root = table_copy(name)
    before = _deltalake(root)
    checkpoints = sorted(p.name for p in (root / "_delta_log").glob("*.checkpoint*"))
    newest = max(int(n.split(".")[0]) for n in checkpoints)
    _drop_commits_before(root, newest)
    assert _ours(root) == before


def test_cli_checkpoint_and_cleanup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _deltalake_table(tmp_path)
    before = _deltalake(root)
    assert main(["checkpoint", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == before["version"] and doc["numOfAddFiles"] == len(before["files"])
    assert doc["parts"] is None and doc["sizeInBytes"] > 0 and doc["seconds"] >= 0
    assert main(["cleanup", str(root), "--dry-run", "--json", "--retention", "0 days"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dryRun"] is True
    assert main(["cleanup", str(root), "--json", "--retention", "interval 0 days"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["deleted"] == dry["deleted"]
    assert _deltalake(root) == before and _ours(root) == before
    assert main(["checkpoint", str(root), "--version", "99"]) == 1
    assert "error:" in capsys.readouterr().err


def test_reference_data_is_present() -> None:
    assert all((TESTDATA / name / "_delta_log").is_dir() for name in REFERENCE)


def test_deltalake_reads_again_once_a_checkpoint_repairs_a_hint_beyond_the_log(
    tmp_path: Path,
) -> None:
    """deltalake fails on a _last_checkpoint naming a missing checkpoint; our next checkpoint
    replaces the hint (it used to keep any hint with a higher version)."""
    import pyarrow as pa

    from tests import oracle_read
    from txntable.engine.table import Table

    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    (tmp_path / "t" / "_delta_log" / "_last_checkpoint").write_text('{"version":900,"size":10}')
    with pytest.raises(AssertionError, match="_last_checkpoint"):
        oracle_read.read(tmp_path / "t")
    assert write_checkpoint(Table.open(str(tmp_path / "t")).snapshot()).hint_written
    assert oracle_read.read(tmp_path / "t")["rows"] == 3
