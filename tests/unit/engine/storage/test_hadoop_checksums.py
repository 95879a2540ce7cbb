"""Local disk shared with Hadoop: a file's checksum file ``.<name>.crc`` goes with the file.

Hadoop's ``LocalFileSystem`` (delta-spark on ``file:`` tables) verifies every file it reads
against its checksum file and refuses one that no longer matches; a missing checksum file is
read as "not checked". So whatever ``LocalStorage`` replaces, creates or deletes must never leave
a checksum of other bytes beside it (tests/integration/test_deltaspark_checksums.py shows what
Hadoop itself then reads).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from txntable.engine.storage.base import FileExistsInStoreError, LocalStorage
from txntable.engine.storage.paths import hadoop_checksum_name, hadoop_checksummed

HINT = "_delta_log/_last_checkpoint"


def _with_checksum(root: Path, relative: str, data: bytes) -> Path:
    """A file as Hadoop leaves it: the bytes and a checksum file beside them."""
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    checksum = target.with_name(hadoop_checksum_name(target.name))
    checksum.write_bytes(b"crc\0" + b"\0\0\x02\0" + b"\x01\x02\x03\x04")
    return checksum


def test_names() -> None:
    assert hadoop_checksum_name("00000000000000000003.json") == ".00000000000000000003.json.crc"
    assert hadoop_checksummed(".00000000000000000003.json.crc") == "00000000000000000003.json"
    assert hadoop_checksummed("._last_checkpoint.crc") == "_last_checkpoint"
    # Delta's own version checksum files are not Hadoop's
    assert hadoop_checksummed("00000000000000000003.crc") is None
    assert hadoop_checksummed("..crc") is None


def test_a_replaced_file_loses_its_checksum(tmp_path: Path) -> None:
    checksum = _with_checksum(tmp_path, HINT, b'{"version":3}')
    LocalStorage(str(tmp_path)).write(HINT, b'{"version":6}')
    assert (tmp_path / HINT).read_bytes() == b'{"version":6}'
    assert not checksum.exists()


def test_the_checksum_goes_before_the_rename_and_again_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hadoop reader between the two steps reads the old bytes without a checksum, never the
    new bytes against the old checksum; a checksum that appears during the rename (a Hadoop
    writer renaming its own in) is taken too."""
    checksum = _with_checksum(tmp_path, HINT, b"old")
    seen: list[tuple[bytes, bool]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append((Path(dst).read_bytes(), checksum.exists()))
        real_replace(src, dst)
        checksum.write_bytes(b"crc\0another writer's")

    monkeypatch.setattr(os, "replace", replace)
    LocalStorage(str(tmp_path)).write(HINT, b"new")
    assert seen == [(b"old", False)]
    assert (tmp_path / HINT).read_bytes() == b"new" and not checksum.exists()


def test_a_stale_checksum_goes_before_a_file_is_created_a_live_one_stays(tmp_path: Path) -> None:
    """A checksum left by a delete that did not take it would make Hadoop refuse the new file
    created under that name (a table re-created at the same path, a checkpoint written again);
    the checksum of a file that exists is left alone when the create loses to it."""
    commit = "_delta_log/00000000000000000000.json"
    checksum = _with_checksum(tmp_path, commit, b"gone")
    (tmp_path / commit).unlink()
    storage = LocalStorage(str(tmp_path))
    storage.write_if_absent(commit, b"new\n")
    assert not checksum.exists()
    checksum = _with_checksum(tmp_path, commit, b"theirs\n")
    with pytest.raises(FileExistsInStoreError):
        storage.write_if_absent(commit, b"ours\n")
    assert checksum.exists() and (tmp_path / commit).read_bytes() == b"theirs\n"
    assert sorted(os.listdir(tmp_path / "_delta_log")) == [checksum.name, Path(commit).name]


def test_a_deleted_file_takes_its_checksum_and_no_other(tmp_path: Path) -> None:
    gone = _with_checksum(tmp_path, "a=1/part-0.parquet", b"x")
    kept = _with_checksum(tmp_path, "a=1/part-1.parquet", b"y")
    orphan = _with_checksum(tmp_path, "a=1/part-2.parquet", b"z")
    (tmp_path / "a=1/part-2.parquet").unlink()
    storage = LocalStorage(str(tmp_path))
    storage.delete_many(["a=1/part-0.parquet", "a=1/part-2.parquet"])
    assert not gone.exists() and not (tmp_path / "a=1/part-0.parquet").exists()
    assert not orphan.exists()  # the file was gone already: its checksum goes all the same
    assert kept.exists() and (tmp_path / "a=1/part-1.parquet").exists()


def test_deleting_many_finds_the_checksums_of_each_directory(tmp_path: Path) -> None:
    """``delete_many`` looks the checksums up per directory: at the root, in nested and
    missing directories, and beside files that have none."""
    at_root = _with_checksum(tmp_path, "part-root.parquet", b"r")
    nested = _with_checksum(tmp_path, "a=1/b=2/part-0.parquet", b"n")
    (tmp_path / "a=1/plain.parquet").write_bytes(b"p")
    stays = _with_checksum(tmp_path, "a=1/b=2/part-1.parquet", b"s")
    storage = LocalStorage(str(tmp_path))
    storage.delete_many(
        ["part-root.parquet", "a=1/b=2/part-0.parquet", "a=1/plain.parquet", "gone=1/part.parquet"]
    )
    assert not at_root.exists() and not (tmp_path / "part-root.parquet").exists()
    assert not nested.exists() and not (tmp_path / "a=1/b=2/part-0.parquet").exists()
    assert not (tmp_path / "a=1/plain.parquet").exists()
    assert stays.exists() and (tmp_path / "a=1/b=2/part-1.parquet").exists()
    assert sorted(p.name for p in (tmp_path / "a=1").iterdir()) == ["b=2"]


def test_a_directory_much_bigger_than_the_deletes_is_not_listed_to_the_end(
    tmp_path: Path,
) -> None:
    """One name out of 20 (40 entries with the checksums): the listing stops at its budget
    and each checksum is tried instead; 15 names: the directory is listed. Both ways every
    deleted file's checksum goes and no other."""
    checksums = [_with_checksum(tmp_path, f"d/part-{i:02d}.parquet", b"x") for i in range(20)]
    storage = LocalStorage(str(tmp_path))
    assert storage._checksums_in("d", 4 * 1) is None
    assert storage._checksums_in("d", 4 * 15) == {c.name for c in checksums}
    storage.delete_many(["d/part-00.parquet"])
    storage.delete_many([f"d/part-{i:02d}.parquet" for i in range(1, 16)])
    assert [c.exists() for c in checksums] == [False] * 16 + [True] * 4
    left = sorted(p.name for p in (tmp_path / "d").iterdir() if not p.name.startswith("."))
    assert left == [f"part-{i:02d}.parquet" for i in range(16, 20)]
