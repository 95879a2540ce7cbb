"""``read_footer``: a data file's Parquet footer read from its last bytes alone (issue 33.3)."""

from __future__ import annotations

import io
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.read.data_files import FOOTER_READ, read_footer
from txntable.engine.storage.base import FsspecStorage, LocalStorage, Storage


def _parquet(columns: int = 2, rows: int = 1000) -> bytes:
    data = pa.table({f"c{i}": list(range(rows)) for i in range(columns)})
    out = io.BytesIO()
    pq.write_table(data, out, row_group_size=100)
    return out.getvalue()


class _Counting(LocalStorage):
    """Local disk that remembers how many bytes each ``read_tail`` asked for."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.asked: list[int] = []

    def read_tail(self, relative: str, length: int) -> bytes:
        self.asked.append(length)
        return super().read_tail(relative, length)

    def read(self, relative: str) -> bytes:
        raise AssertionError("read_footer must not read the whole file")


def test_the_footer_alone_gives_the_row_count(tmp_path: Path) -> None:
    data = _parquet(rows=12_345)
    (tmp_path / "part=a b").mkdir()
    (tmp_path / "part=a b" / "f.parquet").write_bytes(data)
    storage = _Counting(str(tmp_path))
    meta = read_footer(storage, "part=a%20b/f.parquet")  # the log's URI-encoded path
    assert meta.num_rows == 12_345 and meta.num_row_groups == 124
    assert storage.asked == [FOOTER_READ] and len(data) > FOOTER_READ


def test_a_footer_longer_than_the_first_read_is_read_again(tmp_path: Path) -> None:
    data = _parquet(columns=600, rows=3)
    (tmp_path / "wide.parquet").write_bytes(data)
    storage = _Counting(str(tmp_path))
    assert read_footer(storage, "wide.parquet").num_rows == 3
    assert storage.asked[0] == FOOTER_READ and storage.asked[1] > FOOTER_READ


def test_an_absolute_uri_and_an_fsspec_store(tmp_path: Path) -> None:
    (tmp_path / "f.parquet").write_bytes(_parquet(rows=7))
    elsewhere = LocalStorage(str(tmp_path / "table"))
    assert read_footer(elsewhere, f"file://{tmp_path}/f.parquet").num_rows == 7
    memory: Storage = FsspecStorage(fsspec.filesystem("memory"), "/footer-test", "memory://")
    memory.write("g.parquet", _parquet(rows=9))
    assert memory.read_tail("g.parquet", 4) == b"PAR1"
    assert read_footer(memory, "g.parquet").num_rows == 9


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "no footer"),
        (b"not parquet at all", "no footer"),
        (b"PAR1" + b"\xff\xff\x00\x00" + b"PAR1", "footer of 65535 bytes in a 12-byte file"),
        (b"PAR1garbage!" + (8).to_bytes(4, "little") + b"PAR1", "unreadable Parquet footer"),
    ],
)
def test_what_is_no_parquet_file_is_refused_by_name(
    tmp_path: Path, content: bytes, why: str
) -> None:
    (tmp_path / "bad.parquet").write_bytes(content)
    with pytest.raises(InvalidArgumentError, match=f"data file bad.parquet.*{why}"):
        read_footer(LocalStorage(str(tmp_path)), "bad.parquet")


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_footer(LocalStorage(str(tmp_path)), "gone.parquet")
