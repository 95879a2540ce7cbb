"""Opening a table's data files, the one way every reader of rows here uses.

Parquet's INT96 timestamps (Spark's, Hive's and Impala's: a Julian day and the nanoseconds in it)
are read by pyarrow as nanoseconds unless told otherwise, and nanoseconds since 1970 in 64 bits
reach only 1677-09-21 to 2262-04-11: a value such as 9999-12-31 or 0001-01-01 makes the read fail.
A Delta timestamp is microseconds (PROTOCOL.md "Primitive Types"), as Spark reads INT96, so every
data file is read with INT96 at microsecond precision: exact for every value Delta holds.

Spark may also write dates and timestamps before 1900 in its LEGACY (hybrid Julian calendar)
mode, marking the file with ``org.apache.spark.legacyDateTime`` or ``org.apache.spark.legacyINT96``;
it shifts such values back when it reads them, which pyarrow does not. A file so marked that
holds a date or timestamp before 1900 is refused (``check_legacy_calendar``) rather than read
with values Spark would not see.

``read_footer`` reads a data file's footer alone (its last bytes, one ranged request on an object
store): what OPTIMIZE needs to know of a file whose ``add`` carries no ``numRecords``.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.storage.base import Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import decode_path, has_scheme

#: the unit INT96 timestamps are read in
INT96_UNIT = "us"
#: key-value metadata Spark writes into files whose old dates and times use its LEGACY calendar
LEGACY_CALENDAR_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")
#: from 1900-01-01T00:00:00Z on the LEGACY and the proleptic Gregorian calendars agree
_1900_DAYS = (dt.date(1900, 1, 1) - dt.date(1970, 1, 1)).days
_1900_SECONDS = _1900_DAYS * 86_400


def parquet_file(source: Any, **options: Any) -> pq.ParquetFile:
    """A data file opened for reading (a path or a file object), INT96 at microseconds."""
    return pq.ParquetFile(source, coerce_int96_timestamp_unit=INT96_UNIT, **options)


def read_table(source: Any, columns: list[str] | None = None) -> pa.Table:
    """A whole data file (or the named columns) read as ``parquet_file`` reads it, checked by
    ``check_legacy_calendar``."""
    pf = parquet_file(source)
    data = pf.read(columns=columns)
    check_legacy_calendar(pf, data, str(source) if isinstance(source, str) else "")
    return data


#: bytes read from a file's end at first: most footers fit, a larger one costs a second read
FOOTER_READ = 64 * 1024
_MAGIC = b"PAR1"


def read_footer(
    storage: Storage, path: str, storage_options: Mapping[str, Any] | None = None
) -> pq.FileMetaData:
    """The Parquet footer of the data file an ``add`` names (``path`` as the log has it:
    URI-encoded, relative to the table or an absolute URI), read without the data before it.
    A file that is no plain Parquet file (too short, no ``PAR1`` magic, an encrypted footer)
    raises ``InvalidArgumentError`` naming it; a missing one ``FileNotFoundError``."""
    decoded = decode_path(path)
    if has_scheme(path):
        parent, _, name = decoded.rstrip("/").rpartition("/")
        storage, decoded = open_storage(parent or "/", storage_options), name
    tail = storage.read_tail(decoded, FOOTER_READ)
    if len(tail) < 12 or tail[-4:] != _MAGIC:
        raise InvalidArgumentError(f"data file {path} is not a Parquet file (no footer)")
    length = struct.unpack("<I", tail[-8:-4])[0]
    if length + 8 > len(tail):
        if len(tail) < FOOTER_READ:  # the whole file was read, and the footer is longer
            raise InvalidArgumentError(
                f"data file {path} is not a Parquet file (footer of {length} bytes in a "
                f"{len(tail)}-byte file)"
            )
        tail = storage.read_tail(decoded, length + 8)
    try:  # the footer parses alone: Parquet's offsets in it are not followed
        return pq.read_metadata(pa.BufferReader(_MAGIC + tail[-(length + 8) :]))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"data file {path}: unreadable Parquet footer: {exc}") from None


def check_legacy_calendar(pf: pq.ParquetFile, data: pa.Table, where: str = "") -> None:
    """Refuse the rows of a file Spark marked as written in its LEGACY calendar when a date or
    timestamp in them is before 1900: pyarrow reads it in the proleptic Gregorian calendar, so
    the value would differ from the one Spark reads."""
    meta = pf.metadata.metadata or {}
    if not any(key in meta for key in LEGACY_CALENDAR_KEYS):
        return
    for name, column in zip(data.column_names, data.columns, strict=True):
        if _before_1900(column):
            raise InvalidArgumentError(
                f"data file {where or '(stream)'} was written by Spark in its LEGACY calendar "
                f"and column {name} holds a date or timestamp before 1900: read without Spark's "
                "rebasing it would change value, so it is not rewritten"
            )


def _before_1900(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether a column (nested ones included) holds a date or timestamp before 1900. Compared
    as integers: a LEGACY value may be no date Python can hold (year 0)."""
    typ = column.type
    if pa.types.is_timestamp(typ):
        unit_per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[typ.unit]
        low = pc.min(column.cast(pa.int64())).as_py()
        return low is not None and low < _1900_SECONDS * unit_per_second
    if pa.types.is_date32(typ) or pa.types.is_date64(typ):
        days = column.cast(pa.int32()) if pa.types.is_date32(typ) else column.cast(pa.int64())
        low = pc.min(days).as_py()
        limit = _1900_DAYS if pa.types.is_date32(typ) else _1900_SECONDS * 1000
        return low is not None and low < limit
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        children: list[pa.Array] = []
        if pa.types.is_struct(typ):
            children = [chunk.field(i) for i in range(typ.num_fields)]
        elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
            children = [chunk.flatten()]
        elif pa.types.is_map(typ):
            children = [chunk.keys, chunk.items]
        if any(_before_1900(child) for child in children):
            return True
    return False
