"""Writing deletion vectors: the bytes Spark writes, read back by the engine's reader."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from pyroaring import BitMap64

from tests.conftest import TESTDATA
from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.deletion_vectors import (
    deleted_rows,
    vector_file_bytes,
    write_vectors,
    z85_decode,
    z85_encode,
    z85_uuid,
)
from txntable.engine.storage.factory import open_storage

SPARK_DV = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"


def test_a_vector_is_written_byte_for_byte_as_spark_wrote_it() -> None:
    """table-with-dv-small: Spark deleted rows 0 and 9 into one file with one vector."""
    spark = (TESTDATA / "table-with-dv-small" / SPARK_DV).read_bytes()
    data, places = vector_file_bytes([BitMap64([0, 9])])
    assert data == spark
    assert places == [(1, 36)]  # the log says offset 1, sizeInBytes 36
    ident = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")
    assert z85_encode(ident.bytes) == "vBn[lx{q8@P<9BNH/isA"  # the log's pathOrInlineDv


def test_z85_round_trips_and_refuses_ragged_input() -> None:
    for data in (b"", b"\x00\x00\x00\x00", bytes(range(16)), b"\xff" * 8):
        assert z85_decode(z85_encode(data)) == data
    ident = uuid.uuid4()
    assert z85_uuid(z85_encode(ident.bytes)) == str(ident)
    with pytest.raises(InvalidArgumentError, match="multiples of 4"):
        z85_encode(b"abc")


def test_several_vectors_share_one_file_and_read_back() -> None:
    storage = open_storage(f"memory://dv-write-{uuid.uuid4().hex}")
    vectors = [BitMap64([1, 2, 3]), BitMap64(range(0, 200_000, 2)), BitMap64([5, (3 << 32) + 7])]
    written = write_vectors(storage, vectors)
    assert written.path.startswith("deletion_vector_") and written.path.endswith(".bin")
    assert [f.name for f in storage.list_dir("")] == [written.path]
    offsets = [dv.offset or 0 for dv in written.descriptors]
    assert offsets[0] == 1 and offsets == sorted(offsets)
    for rows, dv in zip(vectors, written.descriptors, strict=True):
        assert dv.storage_type == "u" and dv.cardinality == len(rows)
        assert dv.path_or_inline_dv == z85_encode(uuid.UUID(written.path[16:-4]).bytes)
        assert deleted_rows(storage, dv.to_json()) == list(rows)


def test_empty_vectors_are_refused_before_anything_is_written() -> None:
    storage = open_storage(f"memory://dv-write-{uuid.uuid4().hex}")
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        write_vectors(storage, [BitMap64([1]), BitMap64()])
    assert storage.list_dir("") == []


def test_a_vector_outside_the_table_root_is_read_where_it_lies(tmp_path: Path) -> None:
    """A shallow clone's vectors are absolute (``p``) and name the source table's files: they
    are read there (issue 33.3), where they were refused as lying outside the root."""
    source = open_storage(str(tmp_path / "source"))
    written = write_vectors(source, [BitMap64([2, 4, 6])])
    absolute = f"file:{quote(str(tmp_path / 'source' / written.path))}"
    dv = {**written.descriptors[0].to_json(), "storageType": "p", "pathOrInlineDv": absolute}
    clone = open_storage(str(tmp_path / "clone"))
    assert deleted_rows(clone, dv) == [2, 4, 6]
    with pytest.raises(FileNotFoundError):
        deleted_rows(clone, {**dv, "pathOrInlineDv": f"file:{tmp_path}/gone/x.bin"})
