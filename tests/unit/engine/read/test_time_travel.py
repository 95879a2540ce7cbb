"""Incremental refresh and time travel."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import deltagen as g
from txntable.engine.errors import InvalidArgumentError, VersionNotFoundError
from txntable.engine.read import snapshot as snapshot_module
from txntable.engine.table import Table

fingerprint, load, log = g.fingerprint, g.load, g.log


@pytest.fixture
def ckpt_table(table_copy: Any) -> Path:
    path: Path = table_copy("simple_table_with_checkpoint")  # commits 0..10, checkpoint at 10
    return path


# -- refresh and time travel -----------------------------------------------------------------
def test_refresh_equals_a_full_load(tmp_path: Path) -> None:
    g.simple_log(tmp_path, 3)
    snap = load(tmp_path)
    assert snap.refresh() is snap
    g.write_commit(tmp_path, 3, [g.remove("f1.parquet"), g.add("g.parquet")])
    g.write_commit(
        tmp_path, 4, [g.metadata(configuration={"k": "v"}), {"txn": {"appId": "a", "version": 1}}]
    )
    refreshed = snap.refresh()
    assert refreshed.version == 4
    assert fingerprint(refreshed) == fingerprint(load(tmp_path))
    assert snap.version == 2, "refresh must not change the old snapshot"


@pytest.mark.parametrize("replay_limit", [0, 1000])
def test_refresh_across_a_new_checkpoint(
    ckpt_table: Path, monkeypatch: pytest.MonkeyPatch, replay_limit: int
) -> None:
    # replay_limit 0 forces the "restart from the new checkpoint" branch, 1000 the replay branch
    monkeypatch.setattr(snapshot_module, "_REFRESH_REPLAY_LIMIT", replay_limit)
    old = load(ckpt_table, 4)
    g.write_commit(ckpt_table, 11, [g.add("late.parquet")])
    assert fingerprint(old.refresh()) == fingerprint(load(ckpt_table))


def test_refresh_after_log_cleanup(ckpt_table: Path) -> None:
    old = load(ckpt_table, 4)
    g.write_commit(ckpt_table, 11, [g.add("late.parquet")])
    for v in range(10):  # metadata cleanup deleted everything before the checkpoint
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    refreshed = old.refresh()
    assert refreshed.version == 11
    assert fingerprint(refreshed) == fingerprint(load(ckpt_table))


def test_table_snapshot_follows_new_commits(tmp_path: Path) -> None:
    g.simple_log(tmp_path, 2)
    table = Table.open(str(tmp_path))
    assert table.snapshot().version == 1
    g.write_commit(tmp_path, 2, [g.add("n.parquet")])
    assert table.snapshot().version == 2
    assert fingerprint(table.snapshot()) == fingerprint(load(tmp_path))


def test_time_travel_bounds(ckpt_table: Path) -> None:
    with pytest.raises(VersionNotFoundError, match="newest version is 10"):
        load(ckpt_table, 11)
    for v in range(10):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    assert load(ckpt_table, 10).version == 10
    for v in (0, 3, 9):
        with pytest.raises(VersionNotFoundError):
            load(ckpt_table, v)
    table = Table.open(str(ckpt_table))
    with pytest.raises(VersionNotFoundError):
        table.snapshot(version=5)
    with pytest.raises(VersionNotFoundError):
        table.snapshot(version=11)


def test_time_travel_to_every_version_equals_replay_without_checkpoint(
    ckpt_table: Path, tmp_path: Path
) -> None:
    # the same log without its checkpoint is replayed from commit 0 at every version
    bare = tmp_path / "bare"
    shutil.copytree(ckpt_table, bare)
    for name in ("_last_checkpoint", f"{10:020d}.checkpoint.parquet"):
        os.unlink(log(bare) / name)
    for v in range(11):
        a, b = fingerprint(load(ckpt_table, v)), fingerprint(load(bare, v))
        # checkpoints keep only unexpired tombstones; compare live state
        a.pop("tombstones")
        b.pop("tombstones")
        assert a == b, v


BASE_MS = 1_700_000_000_000
HOUR_MS = 3_600_000


def _set_mtime(path: Path, version: int, ms: int) -> None:
    os.utime(log(path) / f"{version:020d}.json", ns=(ms * 1_000_000, ms * 1_000_000))


def test_timestamp_time_travel_uses_file_times_made_monotonic(tmp_path: Path) -> None:
    g.simple_log(tmp_path, 5)
    for version, ms in enumerate([0, HOUR_MS, HOUR_MS, HOUR_MS // 2, 3 * HOUR_MS]):
        _set_mtime(tmp_path, version, BASE_MS + ms)
    table = Table.open(str(tmp_path))
    # adjusted times: 0, 1h, 1h+1ms, 1h+2ms, 3h
    cases = [
        (BASE_MS, 0),
        (BASE_MS + HOUR_MS - 1, 0),
        (BASE_MS + HOUR_MS, 1),
        (BASE_MS + HOUR_MS + 1, 2),
        (BASE_MS + HOUR_MS + 2, 3),
        (BASE_MS + 2 * HOUR_MS, 3),
        (BASE_MS + 10 * HOUR_MS, 4),
    ]
    for ms, version in cases:
        assert table.version_at(ms) == version, ms
        when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
        assert table.snapshot(timestamp=when).version == version
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        table.snapshot(timestamp=BASE_MS - 1)
    with pytest.raises(InvalidArgumentError):
        table.snapshot(timestamp=dt.datetime(2024, 1, 1))  # naive: ambiguous
    with pytest.raises(InvalidArgumentError):
        table.snapshot(version=1, timestamp=BASE_MS)
    with pytest.raises(InvalidArgumentError):
        table.snapshot(version=-1)


def test_timestamp_time_travel_with_in_commit_timestamps(tmp_path: Path) -> None:
    config = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "2",
        "delta.inCommitTimestampEnablementTimestamp": str(BASE_MS + 2 * HOUR_MS),
    }
    ict = g.protocol(3, 7, readerFeatures=[], writerFeatures=["inCommitTimestamp"])
    g.write_commit(tmp_path, 0, [g.commit_info(), g.protocol(), g.metadata()])
    g.write_commit(tmp_path, 1, [g.commit_info(), g.add("a.parquet")])
    g.write_commit(
        tmp_path,
        2,
        [
            g.commit_info(inCommitTimestamp=BASE_MS + 2 * HOUR_MS),
            ict,
            g.metadata(configuration=config),
        ],
    )
    g.write_commit(
        tmp_path, 3, [g.commit_info(inCommitTimestamp=BASE_MS + 5 * HOUR_MS), g.add("b.parquet")]
    )
    # file times disagree with the ICTs: before enablement they count, after it they do not
    for version, ms in enumerate([0, HOUR_MS, 9 * HOUR_MS, 9 * HOUR_MS]):
        _set_mtime(tmp_path, version, BASE_MS + ms)
    table = Table.open(str(tmp_path))
    assert table.version_at(BASE_MS + HOUR_MS) == 1
    assert table.version_at(BASE_MS + 2 * HOUR_MS) == 2
    assert table.version_at(BASE_MS + 4 * HOUR_MS) == 2
    assert table.version_at(BASE_MS + 5 * HOUR_MS) == 3
    assert table.snapshot().timestamp_ms == BASE_MS + 5 * HOUR_MS
    assert table.snapshot(version=1).timestamp_ms == BASE_MS + HOUR_MS


def test_commit_written_after_listing_is_not_in_the_snapshot(tmp_path: Path) -> None:
    from txntable.engine.read.segment import build_segment
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.storage.base import LocalStorage

    g.simple_log(tmp_path, 3)
    storage = LocalStorage(str(tmp_path))
    segment = build_segment(storage)
    g.write_commit(tmp_path, 3, [g.add("late.parquet")])  # lands between LIST and read
    snap = Snapshot._from_segment(storage, segment, None)
    assert snap.version == 2
    assert "late.parquet" not in snap.files().column("path").to_pylist()
    assert "late.parquet" in snap.refresh().files().column("path").to_pylist()


def test_refresh_sees_new_commits_through_a_listing_cache() -> None:
    """Object-store filesystems (gcsfs, adlfs) cache listings; refresh must not be fooled."""
    import uuid

    from fsspec.implementations.memory import MemoryFileSystem

    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.storage.base import FsspecStorage

    class CachingMemoryFileSystem(MemoryFileSystem):  # type: ignore[misc]
        cachable = False

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            path = self._strip_protocol(path)
            if path not in self.dircache:
                self.dircache[path] = super().ls(path, detail=True, **kwargs)
            return self.dircache[path]

        def invalidate_cache(self, path: str | None = None) -> None:
            self.dircache.clear()

    fs = CachingMemoryFileSystem()
    root = f"/txntable-cache-{uuid.uuid4().hex}"
    try:
        for version, actions in {
            0: [g.protocol(), g.metadata()],
            1: [g.add("a.parquet")],
        }.items():
            lines = "".join(g.json_line(a) + "\n" for a in actions)
            fs.pipe_file(f"{root}/_delta_log/{version:020d}.json", lines.encode())
        storage = FsspecStorage(fs, root, f"memory://{root}")
        snap = Snapshot.load(storage)
        assert snap.version == 1
        fs.pipe_file(
            f"{root}/_delta_log/{2:020d}.json", (g.json_line(g.add("b.parquet")) + "\n").encode()
        )
        assert snap.refresh().version == 2
    finally:
        fs.rm(root, recursive=True)
