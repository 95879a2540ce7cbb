"""Log cleanup (PROTOCOL.md "Metadata Cleanup") and the checkpoint post-commit hook."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import deltagen as g
from txntable.engine.checkpoint import retention
from txntable.engine.checkpoint.cleanup import (
    ABANDONED_PARTS_MS,
    abandoned_parts,
    cleanup_expired_logs,
    day_cutoff,
    plan_log_cleanup,
)
from txntable.engine.checkpoint.hooks import checkpoint_hook, should_checkpoint
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import FileInfo, LocalStorage
from txntable.engine.storage.paths import multipart_checkpoint_name
from txntable.engine.table import Table

DAY = retention.DAY_MS
NOW = 1_800_000_000_000  # 2027-01-15T08:00:00Z
CUTOFF = day_cutoff(NOW, 30 * DAY)


def _commit(v: int, mtime: int) -> FileInfo:
    return FileInfo(f"{v:020d}.json", 100, mtime)


def _cp(v: int, mtime: int, size: int = 100) -> FileInfo:
    return FileInfo(f"{v:020d}.checkpoint.parquet", size, mtime)


def test_cutoff_is_truncated_to_midnight_utc() -> None:
    assert CUTOFF % DAY == 0
    assert NOW - 31 * DAY < CUTOFF <= NOW - 30 * DAY


def test_keeps_the_cutoff_checkpoint_and_its_commit() -> None:
    old = CUTOFF - 10 * DAY
    listing = [_commit(v, old + v) for v in range(8)] + [
        _cp(3, old),
        _cp(6, old),
        FileInfo(f"{2:020d}.crc", 10, old),
        FileInfo(f"{6:020d}.crc", 10, old),
        FileInfo(f"{1:020d}.{4:020d}.compacted.json", 10, old),
        FileInfo(f"{6:020d}.{7:020d}.compacted.json", 10, old),
        FileInfo(f"{7:020d}.{7:020d}.compacted.json", 10, old),
    ]
    plan = plan_log_cleanup(listing, CUTOFF)
    assert plan.checkpoint_version == 6
    assert plan.log_files == [
        f"{0:020d}.json",
        f"{1:020d}.{4:020d}.compacted.json",
        f"{1:020d}.json",
        f"{2:020d}.crc",
        f"{2:020d}.json",
        f"{3:020d}.checkpoint.parquet",
        f"{3:020d}.json",
        f"{4:020d}.json",
        f"{5:020d}.json",
        f"{6:020d}.{7:020d}.compacted.json",
    ]


def test_commits_newer_than_the_cutoff_bound_the_checkpoint() -> None:
    old, new = CUTOFF - DAY, CUTOFF + DAY
    listing = [_commit(v, old if v <= 4 else new) for v in range(10)] + [_cp(2, old), _cp(8, new)]
    plan = plan_log_cleanup(listing, CUTOFF)
    assert plan.checkpoint_version == 2
    assert plan.log_files == [f"{0:020d}.json", f"{1:020d}.json"]


def test_modification_times_are_made_monotonic() -> None:
    # commit 3 has a newer mtime than the cutoff; commit 4's older mtime cannot pull the
    # cutoff past it (adjusted to commit 3's time + 1)
    old, new = CUTOFF - DAY, CUTOFF + DAY
    listing = [_commit(0, old), _commit(1, old), _commit(2, old), _commit(3, new), _commit(4, old)]
    listing += [_cp(2, old), _cp(4, old)]
    plan = plan_log_cleanup(listing, CUTOFF)
    assert plan.checkpoint_version == 2


def test_incomplete_or_empty_checkpoints_are_not_cutoffs() -> None:
    old = CUTOFF - DAY
    listing = [_commit(v, old) for v in range(8)] + [
        _cp(2, old),
        _cp(5, old, size=0),
        FileInfo(f"{6:020d}.checkpoint.{1:010d}.{2:010d}.parquet", 10, old),
    ]
    plan = plan_log_cleanup(listing, CUTOFF)
    assert plan.checkpoint_version == 2


def test_nothing_without_a_checkpoint_or_recent_log() -> None:
    old = CUTOFF - DAY
    assert plan_log_cleanup([_commit(v, old) for v in range(5)], CUTOFF).log_files == []
    recent = [_commit(v, CUTOFF + DAY) for v in range(5)] + [_cp(3, CUTOFF + DAY)]
    assert plan_log_cleanup(recent, CUTOFF).checkpoint_version is None


# -- on a real log ---------------------------------------------------------------------------
def _aged_table(
    tmp_path: Path, commits: int = 8, configuration: dict[str, str] | None = None, **proto: object
) -> Path:
    root = tmp_path / "t"
    g.write_commit(
        root,
        0,
        [
            g.commit_info(),
            g.protocol(**proto) if proto else g.protocol(),
            g.metadata(configuration=configuration),
        ],
    )
    for v in range(1, commits):
        g.write_commit(root, v, [g.commit_info(), g.add(f"f{v}.parquet", v)])
    return root


def _age(root: Path, mtime_ms: int) -> None:
    for f in (root / "_delta_log").iterdir():
        if f.is_file():
            os.utime(f, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def test_dry_run_then_cleanup_keeps_the_table_readable(tmp_path: Path) -> None:
    root = _aged_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    _age(root, CUTOFF - DAY)
    before = Snapshot.load(storage)
    listing = sorted(p.name for p in (root / "_delta_log").iterdir())
    dry = cleanup_expired_logs(before, now_ms=NOW, dry_run=True)
    assert dry.checkpoint_version == 5
    assert dry.deleted == tuple(f"_delta_log/{v:020d}.json" for v in range(5))
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == listing
    done = cleanup_expired_logs(before, now_ms=NOW)
    assert done.deleted == dry.deleted
    after = Snapshot.load(storage)
    assert (after.version, after.num_files) == (before.version, before.num_files)
    assert (root / "_delta_log" / f"{5:020d}.json").exists()
    assert cleanup_expired_logs(after, now_ms=NOW).deleted == ()


@pytest.mark.parametrize("damage", ["truncated", "empty-footer", "no-metadata"])
def test_a_corrupt_checkpoint_is_never_the_cutoff(tmp_path: Path, damage: str) -> None:
    """A damaged newer checkpoint must not decide what goes: cleanup falls back to the older
    checkpoint, so every version from it on stays recoverable from commits."""
    root = _aged_table(tmp_path, commits=12)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 4), now_ms=NOW)
    write_checkpoint(Snapshot.load(storage, 8), now_ms=NOW)
    bad = root / "_delta_log" / f"{8:020d}.checkpoint.parquet"
    data = bad.read_bytes()
    if damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "empty-footer":
        bad.write_bytes(data[:-8] + b"\x00" * 8)
    else:  # a readable checkpoint without metaData: from another writer's bug
        import pyarrow.parquet as pq

        table = pq.read_table(bad)
        pq.write_table(table.drop_columns(["metaData"]), bad)
    _age(root, CUTOFF - DAY)
    result = cleanup_expired_logs(Snapshot.load(storage, 7), now_ms=NOW)
    assert result.checkpoint_version == 4
    assert result.deleted == tuple(f"_delta_log/{v:020d}.json" for v in range(4))
    for version in range(4, 12):
        assert Snapshot.load(storage, version).version == version


def test_log_retention_property_and_override(tmp_path: Path) -> None:
    root = _aged_table(tmp_path, configuration={retention.LOG_RETENTION: "interval 60 days"})
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    _age(root, CUTOFF - DAY)  # 31+ days old: kept under 60 days of retention
    snapshot = Snapshot.load(storage)
    assert cleanup_expired_logs(snapshot, now_ms=NOW).deleted == ()
    assert len(cleanup_expired_logs(snapshot, now_ms=NOW, retention_ms=DAY).deleted) == 5


def test_checkpoint_protection_keeps_the_protected_checkpoint(tmp_path: Path) -> None:
    # checkpointProtection (a dropped feature's barrier checkpoint at version 5): this cleanup
    # creates no checkpoint and deletes none at or after its truncation version, which the
    # feature allows; the protected checkpoint goes only with everything before it
    config = {"delta.requireCheckpointProtectionBeforeVersion": "5"}
    proto = {"readerFeatures": [], "writerFeatures": ["checkpointProtection"]}
    root = _aged_table(tmp_path, configuration=config, reader=3, writer=7, **proto)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 3), now_ms=NOW)
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    _age(root, CUTOFF - DAY)
    for v in (6, 7):  # inside the retention: the cutoff checkpoint is 5
        os.utime(root / "_delta_log" / f"{v:020d}.json", ns=((NOW - DAY) * 1_000_000,) * 2)
    before = Snapshot.load(storage)
    result = cleanup_expired_logs(before, now_ms=NOW)
    assert result.skipped is None and result.checkpoint_version == 5
    names = {f"_delta_log/{v:020d}.json" for v in range(5)}
    assert set(result.deleted) == names | {f"_delta_log/{3:020d}.checkpoint.parquet"}
    assert (root / "_delta_log" / f"{5:020d}.checkpoint.parquet").exists()
    after = Snapshot.load(storage)
    assert (after.version, after.num_files) == (before.version, before.num_files)


def test_unknown_writer_feature_refuses_cleanup(tmp_path: Path) -> None:
    proto = {"readerFeatures": [], "writerFeatures": ["someFutureFeature"]}
    root = _aged_table(tmp_path, reader=3, writer=7, **proto)
    _age(root, CUTOFF - DAY)
    before = sorted(p.name for p in (root / "_delta_log").iterdir())
    with pytest.raises(UnsupportedWriterFeatureError, match="log cleanup refused"):
        cleanup_expired_logs(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == before


def test_disabled_cleanup_skips(tmp_path: Path) -> None:
    other = _aged_table(tmp_path / "b", configuration={retention.EXPIRED_LOG_CLEANUP: "false"})
    storage = LocalStorage(str(other))
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    _age(other, CUTOFF - DAY)
    result = cleanup_expired_logs(Snapshot.load(storage), now_ms=NOW)
    assert result.deleted == () and result.skipped


def test_unreferenced_old_sidecars_go(tmp_path: Path) -> None:
    root = _aged_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    sidecars = root / "_delta_log" / "_sidecars"
    sidecars.mkdir()
    (sidecars / "old.parquet").write_bytes(b"x")
    (sidecars / "fresh.parquet").write_bytes(b"x")
    _age(root, CUTOFF - DAY)
    fresh = NOW - 3600_000
    os.utime(sidecars / "fresh.parquet", ns=(fresh * 1_000_000, fresh * 1_000_000))
    os.utime(sidecars / "old.parquet", ns=((CUTOFF - DAY) * 1_000_000,) * 2)
    result = cleanup_expired_logs(Snapshot.load(storage), now_ms=NOW)
    assert "_delta_log/_sidecars/old.parquet" in result.deleted
    assert (sidecars / "fresh.parquet").exists() and not (sidecars / "old.parquet").exists()


def test_crashed_writer_temp_files_go_after_a_day(tmp_path: Path) -> None:
    root = _aged_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    log = root / "_delta_log"
    old_tmp = log / f".{5:020d}.checkpoint.parquet.abc.tmp"
    new_tmp = log / f".{6:020d}.checkpoint.parquet.def.tmp"
    foreign = log / ".other.tmp"
    for f in (old_tmp, new_tmp, foreign):
        f.write_bytes(b"partial")
    _age(root, CUTOFF - DAY)
    os.utime(new_tmp, ns=((NOW - 1000) * 1_000_000,) * 2)
    result = cleanup_expired_logs(Snapshot.load(storage), now_ms=NOW)
    assert f"_delta_log/{old_tmp.name}" in result.deleted
    assert not old_tmp.exists() and new_tmp.exists() and foreign.exists()


# -- the post-commit hook ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Result:
    version: int


def test_cadence_is_sparks() -> None:
    assert [v for v in range(25) if should_checkpoint(v, 10)] == [10, 20]
    assert not should_checkpoint(0, 1)


def test_hook_checkpoints_on_the_interval_only(tmp_path: Path) -> None:
    root = _aged_table(tmp_path, commits=12, configuration={"delta.checkpointInterval": "5"})
    table = Table.open(str(root))
    checkpoint_hook(table, _Result(9))
    assert not list((root / "_delta_log").glob("*.checkpoint.parquet"))
    checkpoint_hook(table, _Result(10))
    assert [p.name for p in (root / "_delta_log").glob("*.checkpoint.parquet")] == [
        f"{10:020d}.checkpoint.parquet"
    ]


def test_hook_swallows_engine_errors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _aged_table(tmp_path, commits=3, configuration={"delta.checkpointInterval": "zero"})
    checkpoint_hook(Table.open(str(root)), _Result(2))
    assert "failed" in caplog.text


def test_hook_through_real_commits(tmp_path: Path) -> None:
    from tests.unit.txn_support import add, fast, new_table

    table = new_table("local", tmp_path, config={"delta.checkpointInterval": "3"})
    for v in range(1, 8):
        txn = table.transaction(fast(post_commit_hooks=[checkpoint_hook]))
        txn.add(add(f"p=1/f{v}", "1"))
        assert txn.commit("WRITE").version == v
    storage = table.storage
    names = [f.name for f in storage.list_log() if ".checkpoint." in f.name]
    assert names == [f"{3:020d}.checkpoint.parquet", f"{6:020d}.checkpoint.parquet"]
    for v in range(6):
        storage.delete(f"_delta_log/{v:020d}.json")
    again = Snapshot.load(storage)
    assert (again.version, again.num_files) == (7, 4 + 7)


def test_each_deleted_file_takes_hadoops_checksum_file_and_orphans_below_go(
    tmp_path: Path,
) -> None:
    """delta-spark leaves ``.<name>.crc`` beside every log file it writes; cleanup used to
    delete the files and leave those (87 beside 9 commits after one race, issue 33). They go
    with their files now, and so do those a cleanup left before, below the cutoff checkpoint;
    the checksums of what stays are kept."""
    root = _aged_table(tmp_path, commits=9)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 2), now_ms=NOW)
    write_checkpoint(Snapshot.load(storage, 5), now_ms=NOW)
    log = root / "_delta_log"
    for f in list(log.iterdir()):
        (log / f".{f.name}.crc").write_bytes(b"crc\0")
    (log / f"{0:020d}.json").unlink()  # as a cleanup that left its checksum did
    (log / f".{0:020d}.checkpoint.parquet.crc").write_bytes(b"crc\0")  # long gone
    (log / f".{7:020d}.checkpoint.parquet.crc").write_bytes(b"crc\0")  # above: not ours
    _age(root, CUTOFF - DAY)

    done = cleanup_expired_logs(Snapshot.load(storage), now_ms=NOW)

    assert done.checkpoint_version == 5
    left = sorted(f.name for f in log.iterdir())
    kept = [f"{v:020d}.json" for v in range(5, 9)] + [f"{5:020d}.checkpoint.parquet"]
    kept.append("_last_checkpoint")
    assert left == sorted(
        [*kept, *(f".{n}.crc" for n in kept), f".{7:020d}.checkpoint.parquet.crc"]
    )
    assert set(done.deleted) == {
        *(f"_delta_log/{v:020d}.json" for v in range(1, 5)),
        f"_delta_log/{2:020d}.checkpoint.parquet",
        f"_delta_log/.{0:020d}.json.crc",
        f"_delta_log/.{0:020d}.checkpoint.parquet.crc",
    }


def test_abandoned_parts_are_incomplete_sets_whose_newest_part_is_an_hour_old() -> None:
    part = multipart_checkpoint_name
    now = 10 * ABANDONED_PARTS_MS
    old = now - ABANDONED_PARTS_MS - 1
    listing = [
        FileInfo(part(5, 1, 2), 10, old),  # complete: kept
        FileInfo(part(5, 2, 2), 10, old),
        FileInfo(part(7, 1, 3), 10, old),  # two of three, both old: abandoned
        FileInfo(part(7, 3, 3), 10, old),
        FileInfo(part(8, 1, 2), 10, old),  # an empty part makes the set incomplete
        FileInfo(part(8, 2, 2), 0, old),
        FileInfo(part(9, 1, 2), 10, old),  # its newest part is recent: may be in progress
        FileInfo(part(9, 2, 2), 0, now - 1000),
        FileInfo(part(7, 1, 2), 10, old),  # another part count at 7, complete: kept
        FileInfo(part(7, 2, 2), 10, old),
    ]
    assert abandoned_parts(listing, now) == sorted(
        [part(7, 1, 3), part(7, 3, 3), part(8, 1, 2), part(8, 2, 2)]
    )
