"""The atomic primitive commits rely on: exactly one creator wins, the file is never replaced."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from txntable.engine.errors import InvalidArgumentError, StorageError
from txntable.engine.storage.base import FileExistsInStoreError, LocalStorage, Storage
from txntable.engine.storage.factory import open_storage


def _race(storage: Storage, writers: int = 16) -> list[int]:
    winners: list[int] = []
    barrier = threading.Barrier(writers)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            storage.write_if_absent("_delta_log/00000000000000000001.json", f"{i}\n".encode())
        except FileExistsInStoreError:
            return
        winners.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners


@pytest.mark.parametrize("kind", ["local", "local-nofsync", "memory"])
def test_exactly_one_of_many_racing_creators_wins(kind: str, tmp_path: Path) -> None:
    if kind == "memory":
        storage = open_storage(f"memory://pia-{uuid.uuid4().hex}")
    else:
        storage = open_storage(str(tmp_path), {"fsync": str(kind == "local").lower()})
    winners = _race(storage)
    assert len(winners) == 1
    assert storage.read("_delta_log/00000000000000000001.json") == f"{winners[0]}\n".encode()
    assert [f.name for f in storage.list_log()] == ["00000000000000000001.json"]


def test_existing_commit_is_never_replaced_and_no_temp_file_stays(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.write_if_absent("_delta_log/00000000000000000000.json", b"first\n")
    inode = os.stat(tmp_path / "_delta_log" / "00000000000000000000.json").st_ino
    with pytest.raises(FileExistsInStoreError):
        storage.write_if_absent("_delta_log/00000000000000000000.json", b"second\n")
    target = tmp_path / "_delta_log" / "00000000000000000000.json"
    assert target.read_bytes() == b"first\n" and target.stat().st_ino == inode
    assert sorted(os.listdir(tmp_path / "_delta_log")) == ["00000000000000000000.json"]


def test_data_files_are_written_once_under_new_names(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.write_new("p=1/part-a.parquet", b"data")
    assert (tmp_path / "p=1" / "part-a.parquet").read_bytes() == b"data"
    with pytest.raises(StorageError, match="exists"):  # a collision is a bug, not an overwrite
        storage.write_new("p=1/part-a.parquet", b"other")


def test_fsync_option_is_checked(tmp_path: Path) -> None:
    assert isinstance(open_storage(str(tmp_path), {"fsync": False}), LocalStorage)
    with pytest.raises(InvalidArgumentError, match="fsync"):
        open_storage(str(tmp_path), {"fsync": "maybe"})
