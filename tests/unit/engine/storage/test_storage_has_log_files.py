"""``Storage.has_log_files`` (Table.open's existence check) agrees with ``bool(list_log())`` on
local disk, where it skips the per-file stat, and on the generic fsspec path."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

from txntable.engine.errors import StorageError, TableNotFoundError
from txntable.engine.storage.base import LocalStorage, MemoryStorage
from txntable.engine.table import Table


def test_local_has_log_files_matches_listing(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    assert storage.has_log_files() is False  # no _delta_log
    (tmp_path / "_delta_log").mkdir()
    assert storage.has_log_files() is False  # empty
    (tmp_path / "_delta_log" / "_sidecars").mkdir()
    assert storage.has_log_files() is False  # directories are not files
    assert storage.has_log_files() == bool(storage.list_log())
    (tmp_path / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    assert storage.has_log_files() is True
    assert storage.has_log_files() == bool(storage.list_log())


def test_local_missing_root_is_a_storage_error(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "nope"))
    with pytest.raises(StorageError):
        storage.has_log_files()
    with pytest.raises(StorageError):
        storage.list_log()


def test_fsspec_default_and_table_open(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    storage = MemoryStorage(fs, "/has-log-t", "memory://has-log-t")
    assert storage.has_log_files() is False
    storage.write("_delta_log/00000000000000000000.json", b"{}\n")
    assert storage.has_log_files() is True
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path))
