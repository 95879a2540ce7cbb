"""Our read path against delta-rs (``deltalake``) on the reference tables and on generated ones.

For every table and every version delta-rs can load, the version, the live files (absolute
location, size, typed partition values), the protocol and the metadata must be identical.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests import deltagen as g
from tests.conftest import TESTDATA, reference_tables
from txntable.engine import Table
from txntable.engine.errors import UnsupportedReaderFeatureError, VersionNotFoundError

pytestmark = pytest.mark.integration

UTC = dt.UTC
BASE = dt.datetime(2020, 1, 1, tzinfo=UTC)


def assert_same(ours: Any, theirs: Any) -> None:
    a, b = g.observed(ours), g.expected(theirs)
    assert a["version"] == b["version"]
    assert a["protocol"] == b["protocol"]
    assert a["metadata"] == b["metadata"]
    missing = sorted(set(b["files"]) - set(a["files"]))
    extra = sorted(set(a["files"]) - set(b["files"]))
    assert (missing, extra) == ([], [])
    for uri, value in b["files"].items():
        assert a["files"][uri] == value, uri


def _loadable_by_deltalake(path: Path) -> bool:
    try:
        DeltaTable(str(path))
    except Exception:
        return False
    return True


@pytest.mark.parametrize("name", reference_tables())
def test_reference_table_every_version(name: str) -> None:
    path = TESTDATA / name
    if not _loadable_by_deltalake(path):
        # delta-rs refuses it (simple_table_features: reader features with reader version 5)
        with pytest.raises(UnsupportedReaderFeatureError, match="reader"):
            Table.open(str(path)).snapshot()
        return
    table = Table.open(str(path))
    latest = DeltaTable(str(path))
    assert_same(table.snapshot(), latest)
    ours_history = [(h["version"], h.get("operation")) for h in table.history()]
    assert ours_history == [(h["version"], h.get("operation")) for h in latest.history()]
    compared = 0
    for version in range(latest.version() + 1):
        try:
            theirs = DeltaTable(str(path), version=version)
        except Exception:
            # delta-rs cannot build it (log starts later): we refuse as well
            with pytest.raises(VersionNotFoundError):
                table.snapshot(version=version)
            continue
        assert_same(table.snapshot(version=version), theirs)
        compared += 1
    assert compared >= 1


def test_all_reference_tables_are_covered() -> None:
    refused = [n for n in reference_tables() if not _loadable_by_deltalake(TESTDATA / n)]
    assert refused == ["simple_table_features"]


# -- generated tables ------------------------------------------------------------------------
def _rows(n: int, start: int = 0) -> pa.Table:
    values = g.SPECIAL_VALUES
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([values[i % len(values)] for i in ids], pa.string()),
            "i": pa.array([None if i % 5 == 0 else i % 3 for i in ids], pa.int32()),
            "d": pa.array([dt.date(2024, 1, 1 + i % 2) for i in ids], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 12, 30, i % 2, 123456, tzinfo=UTC) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "b": pa.array([None if i % 7 == 0 else i % 2 == 0 for i in ids], pa.bool_()),
        }
    )


PARTITIONS = ["s", "i", "d", "ts", "b"]


def _set_commit_times(path: Path) -> None:
    """Commit ``v`` was made at BASE + v hours (deterministic timestamps for time travel)."""
    log = path / "_delta_log"
    for name in os.listdir(log):
        if name.endswith(".json") and name[:20].isdigit() and len(name) == 25:
            t = (BASE + dt.timedelta(hours=int(name[:20]))).timestamp()
            os.utime(log / name, (t, t))


def test_generated_partitioned_table_history(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table: Table | None = None
    history: list[int] = []

    def check() -> None:
        nonlocal table
        theirs = DeltaTable(str(path))
        if table is None:
            table = Table.open(str(path))
        assert_same(table.snapshot(), theirs)  # incremental refresh
        assert_same(Table.open(str(path)).snapshot(), theirs)  # full load
        history.append(theirs.version())

    g.write_rows(path, _rows(26), mode="error", partition_by=PARTITIONS)
    check()
    for k in range(3):
        g.write_rows(path, _rows(13, 100 + 13 * k))
        check()
    DeltaTable(str(path)).delete("id % 3 = 0")
    check()
    DeltaTable(str(path)).delete("s = 'x=y' OR s IS NULL")
    check()
    DeltaTable(str(path)).create_checkpoint()
    check()
    g.write_rows(path, _rows(5, 500))
    check()
    g.write_rows(path, _rows(9, 900), mode="overwrite")
    check()
    g.write_rows(path, _rows(4, 1000))
    check()
    assert history == [0, 1, 2, 3, 4, 5, 5, 6, 7, 8]  # the checkpoint is not a commit

    files = Table.open(str(path)).snapshot().file_uris()
    assert all(os.path.isfile(u) for u in files)

    # time travel by version and by timestamp, before and after the checkpoint
    _set_commit_times(path)
    ours = Table.open(str(path))
    for version in range(9):
        assert_same(ours.snapshot(version=version), DeltaTable(str(path), version=version))
    for hours in (0.0, 0.5, 3.0, 4.99, 5.0, 7.5, 8.0, 30.0):
        when = BASE + dt.timedelta(hours=hours)
        theirs = DeltaTable(str(path))
        theirs.load_as_version(when)
        snap = ours.snapshot(timestamp=when)
        assert snap.version == theirs.version() == min(int(hours), 8)
        assert_same(snap, theirs)
    # before the first commit: delta-rs answers version 0, we (like Spark) refuse
    with pytest.raises(VersionNotFoundError):
        ours.snapshot(timestamp=BASE - dt.timedelta(seconds=1))


def test_generated_table_after_log_cleanup(tmp_path: Path) -> None:
    path = tmp_path / "t"
    g.write_rows(path, _rows(6), mode="error", partition_by=["s"])
    for k in range(5):
        g.write_rows(path, _rows(3, 10 + 3 * k))
    DeltaTable(str(path)).delete("id < 8")
    follower = Table.open(str(path))
    old = follower.snapshot(version=2)
    DeltaTable(str(path)).create_checkpoint()  # at version 6
    g.write_rows(path, _rows(2, 50))
    _set_commit_times(path)  # every commit is years old: all before the checkpoint expire
    DeltaTable(str(path)).cleanup_metadata()
    log_names = sorted(os.listdir(path / "_delta_log"))
    assert f"{0:020d}.json" not in log_names, log_names
    theirs = DeltaTable(str(path))
    assert theirs.version() == 7
    assert_same(Table.open(str(path)).snapshot(), theirs)
    assert_same(old.refresh(), theirs)  # the cleaned-up commits are not needed
    assert_same(follower.snapshot(), theirs)
    assert_same(Table.open(str(path)).snapshot(version=6), DeltaTable(str(path), version=6))
    for version in range(6):
        if f"{version:020d}.json" not in log_names:
            with pytest.raises(VersionNotFoundError):
                Table.open(str(path)).snapshot(version=version)


def test_many_small_commits_with_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "t"
    g.write_rows(
        path,
        pa.table({"id": pa.array([0], pa.int64()), "p": ["a"]}),
        mode="error",
        partition_by=["p"],
        configuration={"delta.checkpointInterval": "7"},
    )
    table = Table.open(str(path))
    for v in range(1, 40):
        g.write_rows(path, pa.table({"id": pa.array([v], pa.int64()), "p": [f"p{v % 4}"]}))
        if v % 13 == 0:
            DeltaTable(str(path)).delete(f"id < {v - 5}")
        if v % 10 == 0:
            assert_same(table.snapshot(), DeltaTable(str(path)))
    theirs = DeltaTable(str(path))
    assert_same(table.snapshot(), theirs)
    assert_same(Table.open(str(path)).snapshot(), theirs)
    checkpoints = [n for n in os.listdir(path / "_delta_log") if ".checkpoint." in n]
    assert checkpoints, "delta-rs should have written checkpoints (post-commit hook)"
    for version in (0, 6, 7, 8, 20, theirs.version()):
        assert_same(table.snapshot(version=version), DeltaTable(str(path), version=version))


def test_multi_part_checkpoint_from_deltalake_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "t"
    g.write_rows(path, _rows(13), mode="error", partition_by=["s"])
    g.write_rows(path, _rows(13, 50))
    DeltaTable(str(path)).create_checkpoint()
    expected = g.observed(Table.open(str(path)).snapshot())
    g.split_checkpoint(path / "_delta_log", 1, 3)
    for v in (0, 1):
        os.unlink(path / "_delta_log" / f"{v:020d}.json")
    (path / "_delta_log" / "_last_checkpoint").write_text(
        json.dumps({"version": 1, "size": 30, "parts": 3})
    )
    assert g.observed(Table.open(str(path)).snapshot()) == expected


# -- the command, as a process ---------------------------------------------------------------
def test_inspect_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": ""}
    command = [sys.executable, "-m", "txntable.cli.main", "inspect"]
    ok = subprocess.run(
        [*command, str(TESTDATA / "checkpoint_with_partitions"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    theirs = DeltaTable(str(TESTDATA / "checkpoint_with_partitions"))
    assert doc["version"] == theirs.version()
    assert sorted(f["uri"] for f in doc["files"]) == sorted(theirs.file_uris())
    bad = subprocess.run(
        [*command, str(TESTDATA / "simple_table_features")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "error: unsupported reader protocol version 5 (this engine reads versions 1-3)"
    ]


@pytest.mark.parametrize("column", ["my col", "a=b", "é", "x%y"])
def test_partition_column_names_with_special_characters(tmp_path: Path, column: str) -> None:
    values = ["v 1", "v/2", None, "50%", "日本"]
    data = pa.table({"id": pa.array(range(len(values)), pa.int64()), column: values})
    g.write_rows(tmp_path, data, mode="error", partition_by=[column])
    snap = Table.open(str(tmp_path)).snapshot()
    assert_same(snap, DeltaTable(str(tmp_path)))
    assert sorted(snap.partition_values().column(column).to_pylist(), key=str) == sorted(
        values, key=str
    )
    assert all(os.path.isfile(u) for u in snap.file_uris())


def test_app_transactions_through_a_checkpoint(tmp_path: Path) -> None:
    from deltalake import CommitProperties, Transaction, write_deltalake

    def write(app: str, version: int, mode: Any = "append") -> None:
        props = CommitProperties(app_transactions=[Transaction(app_id=app, version=version)])
        data = pa.table({"x": [version]})
        write_deltalake(str(tmp_path), data, mode=mode, commit_properties=props)

    write("app", 7, "error")
    write("app", 3)  # versions are opaque: the latest wins even when smaller
    DeltaTable(str(tmp_path)).create_checkpoint()
    write("other", 1)
    table = Table.open(str(tmp_path))
    for snap in (table.snapshot(), table.snapshot(version=1), table.snapshot(version=0)):
        theirs = DeltaTable(str(tmp_path), version=snap.version)
        for app in ("app", "other", "none"):
            assert snap.txn_version(app) == theirs.transaction_version(app), (snap.version, app)
    assert table.snapshot().txn_version("app") == 3
