"""Real concurrency on one local table: our appenders, delta-rs appenders and a compactor at once.

The processes race for the same versions through hard-link put-if-absent (delta-rs commits the
same way), while this process watches ``_delta_log`` and remembers the inode and bytes of every
commit file the moment it appears: a commit file that is ever replaced is caught, not inferred.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.integration.concurrent_writers import SCHEMA, rewrite_once
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import ConcurrentDeleteReadException
from txntable.engine.model.actions import CommitInfo, parse_commit
from txntable.engine.storage.paths import decode_path
from txntable.engine.table import Table

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUN_SECONDS = 4.0


class LogWatcher(threading.Thread):
    """Polls ``_delta_log``; records (inode, sha256) of each commit file at first sight."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(daemon=True)
        self.log_dir = log_dir
        self.seen: dict[str, tuple[int, str]] = {}
        self.changed: list[str] = []
        self.stop = threading.Event()

    def poll(self) -> None:
        for entry in os.scandir(self.log_dir):
            if not entry.name.endswith(".json") or not entry.name[0].isdigit():
                continue
            try:
                ino = entry.inode()
                digest = hashlib.sha256(Path(entry.path).read_bytes()).hexdigest()
            except FileNotFoundError:
                self.changed.append(f"{entry.name} vanished")
                continue
            first = self.seen.setdefault(entry.name, (ino, digest))
            if first != (ino, digest):
                self.changed.append(entry.name)

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            time.sleep(0.005)
        self.poll()


def _spawn(*args: str) -> subprocess.Popen[str]:
    """A writer process; its last two arguments are the go file and its run time."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.concurrent_writers", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start(procs: dict[str, subprocess.Popen[str]], go_file: Path) -> None:
    """Wait until every process has loaded, then let them all go at once."""
    for name, proc in procs.items():
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line or "{}").get("ready"), f"{name} did not start: {proc.stderr}"
    go_file.touch()


def _events(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _our_rows(table: Table) -> list[int]:
    snap = table.snapshot()
    ids: list[int] = []
    for add in snap.add_actions():
        ids += (
            pq.read_table(snap.storage.open_input(decode_path(add.path))).column("id").to_pylist()
        )
    return ids


def _new_table(path: Path) -> Table:
    table = Table.create(str(path), SCHEMA, partition_by=["p"])
    seed = pa.table(
        {"id": [-1, -2, -3], "writer": ["seed"] * 3, "p": ["a", "b", "c"]}, schema=SCHEMA
    )
    table.append(seed)
    return table


def test_our_appenders_deltalake_appenders_and_a_compactor_race_safely(tmp_path: Path) -> None:
    go = tmp_path / "go"
    tmp_path = tmp_path / "table"
    _new_table(tmp_path)
    watcher = LogWatcher(tmp_path / "_delta_log")
    watcher.start()
    run = (str(go), str(RUN_SECONDS))
    procs = {
        f"ours{i}": _spawn("ours", str(tmp_path), f"ours{i}", str(i * 10**6), *run)
        for i in range(3)
    }
    procs |= {
        f"dl{i}": _spawn("deltalake", str(tmp_path), f"dl{i}", str((10 + i) * 10**6), *run)
        for i in range(2)
    }
    procs["rewrite"] = _spawn("rewrite", str(tmp_path), "a", *run)
    _start(procs, go)
    events = {name: _events(proc) for name, proc in procs.items()}
    watcher.stop.set()
    watcher.join()

    # no commit file was ever replaced, and versions are contiguous
    assert watcher.changed == []
    names = sorted(p.name for p in (tmp_path / "_delta_log").glob("*.json"))
    assert names == [f"{v:020d}.json" for v in range(len(names))]
    assert set(watcher.seen) == set(names)

    # every row reported as committed is there exactly once, and nothing else is
    written = [-1, -2, -3] + [i for evs in events.values() for e in evs for i in e.get("ids", ())]
    ours = _our_rows(Table.open(str(tmp_path)))
    assert Counter(ours) == Counter(written)
    theirs = pa.table(DeltaTable(str(tmp_path)).to_pyarrow_table()).column("id").to_pylist()
    assert Counter(theirs) == Counter(written)

    # both engines agree on the final state
    final = Table.open(str(tmp_path)).snapshot()
    assert final.version == DeltaTable(str(tmp_path)).version() == len(names) - 1
    assert sorted(final.file_uris()) == sorted(DeltaTable(str(tmp_path)).file_uris())

    # the compactor never lost to the appenders, and really ran
    rewrites = [e for e in events["rewrite"] if "rewrite" in e]
    assert [e for e in rewrites if e["rewrite"] == "conflict"] == []
    assert any(e["rewrite"] == "ok" for e in rewrites)
    appended = [e for n in ("ours0", "ours1", "ours2") for e in events[n]]
    assert appended and all(e["version"] > 0 for e in appended)

    # each of our commits landed once: txnIds are unique across the log
    txn_ids = []
    for name in names:
        info = next(
            a
            for a in parse_commit((tmp_path / "_delta_log" / name).read_bytes())
            if isinstance(a, CommitInfo)
        )
        if info.txn_id:
            txn_ids.append(info.txn_id)
    assert len(txn_ids) == len(set(txn_ids))


def test_delete_racing_a_rewrite_of_the_same_partition_never_resurrects_rows(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    tmp_path = tmp_path / "table"
    table = _new_table(tmp_path)
    for i in range(12):
        table.append(
            pa.table(
                {"id": [100 + i], "writer": ["t"], "p": ["a" if i % 2 else "b"]}, schema=SCHEMA
            )
        )
    rewriter = _spawn("rewrite", str(tmp_path), "a", str(go), "2.0")
    _start({"rewrite": rewriter}, go)
    time.sleep(0.5)  # let it rewrite a few times first
    deleted = Table.open(str(tmp_path)).delete("p = 'a'")
    assert deleted is not None
    events = _events(rewriter)
    reopened = Table.open(str(tmp_path))
    remaining = pa.table(DeltaTable(str(tmp_path)).to_pyarrow_table())
    assert "a" not in remaining.column("p").to_pylist()
    assert sorted(_our_rows(reopened)) == sorted(remaining.column("id").to_pylist())
    assert (
        reopened.snapshot()
        .files()
        .filter(pa.compute.equal(reopened.snapshot().partition_values().column("p"), "a"))
        .num_rows
        == 0
    )
    # rewrites of 'a' that lost against the delete failed with a delete conflict
    conflicts = {e["error"] for e in events if e.get("rewrite") == "conflict"}
    assert conflicts <= {"ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException"}


def test_rewrite_that_read_deleted_files_fails_and_delete_after_rewrite_rereads(
    tmp_path: Path,
) -> None:
    """The two orders of the race, made deterministic."""
    table = _new_table(tmp_path)
    for i in range(4):
        table.append(pa.table({"id": [100 + i], "writer": ["t"], "p": ["a"]}, schema=SCHEMA))
    # (1) the rewrite read 'a', the delete commits first: the rewrite must fail
    snapshot = table.snapshot()
    stale = Transaction(table, snapshot)
    files = stale.scan("p = 'a'")
    assert table.delete("p = 'a'") is not None
    live = {a.path: a for a in snapshot.add_actions()}
    stale.add(*(live[p].to_remove(0, False) for p in files.column("path").to_pylist()))
    with pytest.raises(ConcurrentDeleteReadException):
        stale.commit("OPTIMIZE", changes_data=False)
    assert sorted(_our_rows(table)) == [-3, -2]

    # (2) the rewrite commits between the delete's read and its commit: the delete re-reads
    for i in range(4):
        table.append(pa.table({"id": [200 + i], "writer": ["t"], "p": ["a"]}, schema=SCHEMA))
    from txntable.engine.write import api as write_api

    original = write_api._writable_snapshot
    calls = {"n": 0}

    def rewrite_then_read(t: Table) -> Any:
        snap = original(t)
        if calls["n"] == 0:
            assert rewrite_once(Table.open(str(tmp_path)), "a")["rewrite"] == "ok"
        calls["n"] += 1
        return snap

    write_api._writable_snapshot = rewrite_then_read  # type: ignore[assignment]
    try:
        result = table.delete("p = 'a'")
    finally:
        write_api._writable_snapshot = original  # type: ignore[assignment]
    assert result is not None and calls["n"] == 2
    assert sorted(_our_rows(Table.open(str(tmp_path)))) == [-3, -2]
