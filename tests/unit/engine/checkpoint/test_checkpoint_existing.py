"""A checkpoint already there for the version is left alone, whoever wrote it (issue 33).

Our writer used to write its own checkpoint over one delta-spark had written for the same
version; on local disk Hadoop's checksum file of delta-spark's bytes stayed beside ours and
delta-spark refused the file from then on. A checkpoint there complete holds the same state by
definition: it is kept, the hint is written for it only if the hint names an older one, and a
file of another writer's incomplete set of parts is kept too (tests/integration/
test_deltaspark_checksums.py runs the same through delta-spark's own reader).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests import deltagen as g
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.read import last_checkpoint
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.paths import hadoop_checksum_name

NOW = 1_800_000_000_000


def _table(tmp_path: Path, commits: int = 6) -> Path:
    return g.simple_log(tmp_path / "t", commits)


def _checksum(path: Path) -> Path:
    """Give ``path`` a checksum file, as Hadoop leaves beside what it writes."""
    checksum = path.with_name(hadoop_checksum_name(path.name))
    checksum.write_bytes(b"crc\0\0\0\x02\0" + os.urandom(4))
    return checksum


def _identity(path: Path) -> tuple[int, bytes]:
    return path.stat().st_ino, path.read_bytes()


def _from_checkpoint_only(root: Path, tmp_path: Path, version: int) -> dict[str, Any]:
    """The table as its checkpoint alone gives it (the commits it covers deleted in a copy)."""
    copy = g.copy_table(root, tmp_path / "copy")
    for v in range(version + 1):
        (g.log(copy) / f"{v:020d}.json").unlink()
    return g.fingerprint(g.load(copy))


def test_a_complete_classic_checkpoint_and_its_hint_are_left_alone(tmp_path: Path) -> None:
    root = _table(tmp_path)
    storage = LocalStorage(str(root))
    first = write_checkpoint(Snapshot.load(storage), now_ms=NOW)
    (name,) = first.files
    checkpoint, hint = g.log(root) / name, g.log(root) / "_last_checkpoint"
    checksums = [_checksum(checkpoint), _checksum(hint)]
    before = [_identity(checkpoint), _identity(hint)]

    again = write_checkpoint(Snapshot.load(storage), now_ms=NOW + 1)

    assert again.existing and not again.hint_written
    assert (again.version, again.files, again.parts) == (first.version, first.files, None)
    assert (again.size, again.size_in_bytes, again.num_of_add_files) == (
        first.size,
        first.size_in_bytes,
        first.num_of_add_files,
    )
    assert [_identity(checkpoint), _identity(hint)] == before
    assert all(c.exists() for c in checksums)


def test_a_complete_multipart_checkpoint_is_kept_whatever_our_layout(tmp_path: Path) -> None:
    root = _table(tmp_path)
    storage = LocalStorage(str(root))
    parts = write_checkpoint(Snapshot.load(storage), part_size=2, now_ms=NOW)
    assert parts.parts is not None and parts.parts > 1
    before = {name: _identity(g.log(root) / name) for name in parts.files}

    again = write_checkpoint(Snapshot.load(storage), now_ms=NOW)  # we would write one file

    assert again.existing and (again.files, again.parts) == (parts.files, parts.parts)
    assert (again.size, again.size_in_bytes) == (parts.size, parts.size_in_bytes)
    assert {name: _identity(g.log(root) / name) for name in parts.files} == before
    assert not (g.log(root) / f"{parts.version:020d}.checkpoint.parquet").exists()


def test_a_complete_v2_checkpoint_is_kept(table_copy: Any) -> None:
    """delta-spark's V2 checkpoint (a JSON top-level file and a sidecar) at version 8 of the
    reference table: nothing is written beside it, its figures are those delta-spark's hint
    gives (11 actions: four in the top-level file, seven in the sidecar)."""
    root = table_copy("checkpoint-v2-table")
    storage = LocalStorage(str(root))
    listing_before = sorted(os.listdir(g.log(root)))
    hint = _identity(g.log(root) / "_last_checkpoint")

    result = write_checkpoint(Snapshot.load(storage, 8))

    assert result.existing and not result.hint_written
    assert result.files == (
        "00000000000000000008.checkpoint.e5ac4dc4-be27-4106-8a55-609707487f83.json",
    )
    assert (result.size, result.num_of_add_files, result.parts) == (11, 7, None)
    assert sorted(os.listdir(g.log(root))) == listing_before
    assert _identity(g.log(root) / "_last_checkpoint") == hint


def test_an_incomplete_set_of_parts_is_completed_around_the_parts_there(tmp_path: Path) -> None:
    """Another writer's parts (finished files of a set still being written, or of a writer that
    crashed) are kept; only the missing ones are written, and the checkpoint is whole."""
    root = _table(tmp_path, commits=9)
    storage = LocalStorage(str(root))
    expected = g.fingerprint(Snapshot.load(storage))
    first = write_checkpoint(Snapshot.load(storage), part_size=2, now_ms=NOW)
    assert first.parts == 4
    theirs, missing = first.files[::3], [n for i, n in enumerate(first.files) if i % 3]
    for name in missing:
        (g.log(root) / name).unlink()
    (g.log(root) / "_last_checkpoint").unlink()
    checksums = [_checksum(g.log(root) / name) for name in theirs]
    before = {name: _identity(g.log(root) / name) for name in theirs}

    again = write_checkpoint(Snapshot.load(storage), part_size=2, now_ms=NOW + 1)

    assert not again.existing and again.files == first.files and again.hint_written
    assert {name: _identity(g.log(root) / name) for name in theirs} == before
    assert all(c.exists() for c in checksums)
    assert all((g.log(root) / name).exists() for name in missing)
    assert again.size == first.size
    assert _from_checkpoint_only(root, tmp_path, again.version) == {
        **expected,
        "version": again.version,
    }


def test_a_checkpoint_file_that_does_not_parse_is_replaced_with_its_checksum(
    tmp_path: Path,
) -> None:
    root = _table(tmp_path)
    storage = LocalStorage(str(root))
    first = write_checkpoint(Snapshot.load(storage), now_ms=NOW)
    checkpoint = g.log(root) / first.files[0]
    checkpoint.write_bytes(b"PAR1 truncated by a writer that was not atomic")
    checksum = _checksum(checkpoint)

    again = write_checkpoint(Snapshot.load(storage), now_ms=NOW)

    assert not again.existing and again.files == first.files
    assert pq.ParquetFile(checkpoint).metadata.num_rows == first.size
    assert not checksum.exists()


def test_an_older_hint_is_replaced_for_the_kept_checkpoint_without_its_checksum(
    tmp_path: Path,
) -> None:
    """Another writer checkpointed version 5 and has not written the hint yet (or crashed):
    the hint moves to version 5, and Hadoop's checksum of the old hint goes with it."""
    root = _table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 3), now_ms=NOW)
    old_hint = (g.log(root) / "_last_checkpoint").read_bytes()
    theirs = write_checkpoint(Snapshot.load(storage), part_size=2, now_ms=NOW)
    (g.log(root) / "_last_checkpoint").write_bytes(old_hint)
    hint_checksum = _checksum(g.log(root) / "_last_checkpoint")
    parts = {name: _identity(g.log(root) / name) for name in theirs.files}

    result = write_checkpoint(Snapshot.load(storage), now_ms=NOW)

    assert result.existing and result.hint_written and result.files == theirs.files
    hint = last_checkpoint.read(storage)
    assert hint is not None and (hint.version, hint.parts, hint.size) == (
        5,
        theirs.parts,
        theirs.size,
    )
    assert hint.raw["numOfAddFiles"] == 5 and hint.raw["sizeInBytes"] == theirs.size_in_bytes
    assert not hint_checksum.exists()
    assert {name: _identity(g.log(root) / name) for name in theirs.files} == parts
