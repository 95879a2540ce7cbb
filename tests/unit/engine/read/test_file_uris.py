"""``Snapshot.file_uris()`` takes a vectorised path for plain relative paths; it must give exactly
what resolving every path one by one gives, whatever mix of encoded, absolute and URI paths."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from tests.unit.case_ids import readable
from txntable.engine.model.actions import AddFile, Metadata, Protocol
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.state import ADD_SCHEMA, REMOVE_SCHEMA, TableState, actions_to_table
from txntable.engine.storage.base import LocalStorage, MemoryStorage, Storage

PATHS = [
    "date=2024-01-01/part-0.parquet",
    "a%20b/part-1.parquet",
    "x%2525y/part-2.parquet",  # decoded exactly once -> x%25y
    "plus+sign/part-3.parquet",
    "/abs/elsewhere/part-4.parquet",
    "file:///abs/uri/part-5.parquet",
    "file:/abs/short/part-6.parquet",
    "s3://bucket/t/part-7.parquet",
    "c=1:2/part-8.parquet",
    "",
    "ünï/cödé-9.parquet",
]


def _snapshot(storage: Storage, chunks: list[list[str]]) -> Snapshot:
    tables = [
        actions_to_table([AddFile(path=p, size=1, modification_time=0) for p in chunk], ADD_SCHEMA)
        for chunk in chunks
    ]
    files = pa.concat_tables(tables)
    state = TableState(
        0,
        Protocol(1, 2),
        Metadata(id="t", schema_string='{"type":"struct","fields":[]}'),
        files,
        REMOVE_SCHEMA.empty_table(),
    )
    return Snapshot(storage, state, 0)


def _storages(tmp_path: Path) -> list[Storage]:
    return [
        LocalStorage(str(tmp_path)),
        LocalStorage("/"),
        MemoryStorage(fsspec.filesystem("memory"), "/bench-t", "memory://bench-t"),
    ]


@pytest.mark.parametrize(
    "chunks",
    [
        [PATHS],
        [[p] for p in PATHS],  # one chunk per row
        [PATHS[:1] * 50, PATHS, []],  # a clean chunk, a mixed one and an empty one
        [[f"d={i % 7}/f{i}.parquet" for i in range(1000)]],
    ],
    ids=readable,
)
def test_file_uris_equal_row_by_row_resolution(tmp_path: Path, chunks: list[list[str]]) -> None:
    for storage in _storages(tmp_path):
        snapshot = _snapshot(storage, chunks)
        raw = snapshot.files().column("path").to_pylist()
        assert snapshot.file_uris() == [snapshot.resolve(p) for p in raw]


def test_file_uris_decode_and_join_as_documented(tmp_path: Path) -> None:
    snapshot = _snapshot(LocalStorage(str(tmp_path)), [PATHS])
    uris = snapshot.file_uris()
    assert uris[0] == f"{tmp_path}/date=2024-01-01/part-0.parquet"
    assert uris[1] == f"{tmp_path}/a b/part-1.parquet"
    assert uris[2] == f"{tmp_path}/x%25y/part-2.parquet"
    assert uris[3] == f"{tmp_path}/plus+sign/part-3.parquet"
    assert uris[4] == "/abs/elsewhere/part-4.parquet"
    assert uris[5] == "/abs/uri/part-5.parquet"
    assert uris[7] == "s3://bucket/t/part-7.parquet"


def test_sliced_chunks_read_only_their_own_bytes(tmp_path: Path) -> None:
    # a chunk that is a slice of a longer array starts at a non-zero offset: the byte scan must
    # look at its own rows (the encoded paths come last, so scanning from row 0 would miss them)
    storage = LocalStorage(str(tmp_path))
    paths = [*(f"d={i}/f{i}.parquet" for i in range(6)), "a%20b/x.parquet", "c:d/y.parquet"]
    full = _snapshot(storage, [paths])
    for start, length in ((1, 6), (0, 3), (5, 3), (7, 1), (2, 0)):
        sliced = full.files().slice(start, length)
        state = TableState(0, full.protocol, full.metadata, sliced, REMOVE_SCHEMA.empty_table())
        snapshot = Snapshot(storage, state, 0)
        raw = sliced.column("path").to_pylist()
        assert snapshot.file_uris() == [snapshot.resolve(p) for p in raw]


def test_a_slice_is_the_slice_of_the_whole(tmp_path: Path) -> None:
    """``file_uris(start, stop)`` and ``raw_partition_values(start, stop)`` (what a caller
    streaming a big table asks for) are the slices of the whole lists, across chunks."""
    snapshot = _snapshot(LocalStorage(str(tmp_path)), [PATHS[:1] * 5, PATHS, [], PATHS[3:]])
    uris, values = snapshot.file_uris(), snapshot.raw_partition_values()
    n = snapshot.num_files
    assert len(uris) == len(values) == n == 5 + len(PATHS) + len(PATHS) - 3
    for start, stop in ((0, 2), (3, 9), (4, n), (n - 1, None), (2, n + 50), (n, None), (7, 7)):
        assert snapshot.file_uris(start, stop) == uris[start:stop], (start, stop)
        assert snapshot.raw_partition_values(start, stop) == values[start:stop], (start, stop)
    for start, stop in ((-1, None), (3, 2)):
        with pytest.raises(ValueError, match="not a slice"):
            snapshot.file_uris(start, stop)
