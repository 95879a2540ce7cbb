"""Which data files the current Iceberg metadata of a UniForm table reads
(``txntable.engine.read.iceberg_metadata``, ADR 0010), on metadata pyiceberg writes."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.iceberg_metadata import IcebergWriter
from txntable.engine.errors import IcebergMetadataError
from txntable.engine.read.iceberg_metadata import candidates, current_files
from txntable.engine.storage.base import FileInfo, LocalStorage


def _files(root: Path) -> set[str]:
    return set(current_files(LocalStorage(str(root))).paths)


def test_the_current_snapshot_is_read_not_the_files_it_replaced(tmp_path: Path) -> None:
    root = tmp_path / "t"
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    iceberg.append("p=1/a.parquet", "p=2/b.parquet", delta_version=3)
    current = iceberg.replace(["p=1/a.parquet"], ["p=1/c.parquet"], delta_version=5)
    found = current_files(LocalStorage(str(root)))
    assert found.paths == {"p=2/b.parquet", "p=1/c.parquet"}  # a's entry is DELETED
    (snapshot,) = found.snapshots
    assert snapshot.metadata_file == iceberg.metadata_file
    assert (snapshot.snapshot_id, snapshot.delta_version) == (current, 5)


def test_no_metadata_and_no_snapshot_read_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    assert current_files(LocalStorage(str(root))).paths == frozenset()
    (root / "metadata").mkdir()
    (root / "metadata" / "v1.metadata.json").write_text('{"format-version": 2}')
    (root / "metadata" / "version-hint.text").write_text("1")
    found = current_files(LocalStorage(str(root)))
    assert found.paths == frozenset()
    assert [(s.metadata_file, s.snapshot_id) for s in found.snapshots] == [
        ("metadata/v1.metadata.json", None)
    ]


def test_files_outside_the_root_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "t"
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    iceberg.append("a.parquet", f"file:{tmp_path}/elsewhere/b.parquet", "s3://bucket/c.parquet")
    assert _files(root) == {"a.parquet"}


def _info(name: str, mtime: int = 0) -> FileInfo:
    return FileInfo(name, 1, mtime)


def test_candidates_are_the_highest_numbered_and_the_last_written() -> None:
    listing = [
        _info("00001-a.metadata.json", 10),
        _info("00002-b.metadata.json", 20),
        _info("00002-c.metadata.json", 30),  # two attempts at version 2: either may be current
        _info("snap-1-0-x.avro", 99),
        _info("x-m0.avro", 99),
        _info("version-hint.text", 99),
    ]
    names = [f.name for f in candidates(listing)]
    assert names == ["00002-b.metadata.json", "00002-c.metadata.json"]
    # UniForm turned off and on again starts at 00000: the file written last counts too
    restarted = [*listing, _info("00000-d.metadata.json", 40)]
    names = [f.name for f in candidates(restarted)]
    assert names == ["00000-d.metadata.json", "00002-b.metadata.json", "00002-c.metadata.json"]
    hadoop = [_info("v1.metadata.json", 5), _info("v12.gz.metadata.json", 1)]
    assert [f.name for f in candidates(hadoop)] == ["v1.metadata.json", "v12.gz.metadata.json"]
    assert candidates([_info("v1.avro")]) == []


def test_every_metadata_file_that_may_be_current_is_honoured(tmp_path: Path) -> None:
    root = tmp_path / "t"
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    iceberg.append("a.parquet")
    older = root / iceberg.metadata_file  # reads a
    iceberg.replace(["a.parquet"], ["b.parquet"])
    assert _files(root) == {"b.parquet"}
    # a second attempt at the current file's version (its catalog commit may have failed, and
    # the older one be current): both are read
    number = iceberg.metadata_file.split("/")[1].split("-")[0]
    shutil.copy(older, root / "metadata" / f"{number}-attempt.metadata.json")
    assert _files(root) == {"a.parquet", "b.parquet"}


def test_gzip_compressed_metadata_is_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    iceberg.append("a.parquet")
    plain = root / iceberg.metadata_file
    number = plain.name.split("-")[0]
    packed = root / "metadata" / f"{int(number) + 1:05d}-z.gz.metadata.json"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    assert _files(root) == {"a.parquet"}


def _current(root: Path, iceberg: IcebergWriter) -> tuple[Path, dict[str, object]]:
    path = root / iceberg.metadata_file
    return path, json.loads(path.read_text())


def _manifest_list(doc: dict[str, object]) -> str:
    snapshots = doc["snapshots"]
    assert isinstance(snapshots, list)
    (snapshot,) = [s for s in snapshots if s["snapshot-id"] == doc["current-snapshot-id"]]
    return str(snapshot["manifest-list"])


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("not json", "is not JSON"),
        ("not iceberg", "is not Iceberg table metadata"),
        ("snapshot not listed", "current snapshot 12345 is not among its snapshots"),
        ("manifest list missing", "is missing: the Iceberg metadata is broken"),
        ("manifest list outside the root", "outside the table root"),
        ("manifest not avro", "cannot be decoded as Avro"),
    ],
)
def test_metadata_that_cannot_be_read_is_an_error(tmp_path: Path, damage: str, said: str) -> None:
    root = tmp_path / "t"
    iceberg = IcebergWriter(root, tmp_path / "catalog")
    iceberg.append("a.parquet")
    path, doc = _current(root, iceberg)
    manifest_list = Path(_manifest_list(doc).removeprefix("file://").removeprefix("file:"))
    if damage == "not json":
        path.write_text('{"format-version": 2, ')
    elif damage == "not iceberg":
        path.write_text("[]")
    elif damage == "snapshot not listed":
        path.write_text(json.dumps({**doc, "current-snapshot-id": 12345}))
    elif damage == "manifest list missing":
        manifest_list.unlink()
    elif damage == "manifest list outside the root":
        moved = tmp_path / manifest_list.name
        shutil.move(manifest_list, moved)
        text = path.read_text().replace(_manifest_list(doc), f"file:{moved}")
        path.write_text(text)
    else:
        for manifest in (root / "metadata").glob("*-m*.avro"):
            manifest.write_bytes(b"Obj\x01 but not really")
    with pytest.raises(IcebergMetadataError, match=said):
        current_files(LocalStorage(str(root)))
