"""Deletion vectors: which rows of a data file a table has deleted, read and written.

A deletion vector (PROTOCOL.md, "Deletion Vector Format") is a 64-bit Roaring bitmap of row
indexes, stored inline in the log (``storageType`` ``i``, Z85 text) or in a file next to the
data (``u``: a UUID under the table root, ``p``: an absolute path) at ``offset``, as a 4-byte
big-endian size, the bitmap, then a CRC-32 of it. The bitmap starts with a 4-byte magic number;
the "portable" layout is an 8-byte bucket count, then per bucket a 4-byte key (the high 32 bits of
its row indexes) and a standard 32-bit Roaring bitmap; the "native" layout has a 4-byte count and
no keys (bucket ``i`` holds the rows with high bits ``i``). The 32-bit bitmaps are decoded by
pyroaring, the maintained Python binding of CRoaring.

Writing (``write_vectors``) produces what Spark writes: one ``deletion_vector_<uuid>.bin`` in the
table root holding the vectors of one commit (a version byte ``1``, then each vector framed as
above, portable layout), each described as storage type ``u`` with the UUID in Z85 and the
offset of its size field. pyroaring's 64-bit bitmap serializes exactly the portable layout.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyroaring import BitMap, BitMap64

from txntable.engine.errors import CorruptLogError, EngineError, InvalidArgumentError
from txntable.engine.model.actions import DeletionVector
from txntable.engine.storage.base import Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import decode_path, has_scheme

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}


def z85_decode(text: str) -> bytes:
    """Bytes of Z85 (Base85) text, 5 characters per 4 bytes, as Delta encodes DV ids and data."""
    if len(text) % 5:
        raise InvalidArgumentError(f"Base85 text of {len(text)} characters is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            if char not in _Z85_INDEX:
                raise InvalidArgumentError(f"{text!r} is not Base85")
            value = value * 85 + _Z85_INDEX[char]
        if value >= 1 << 32:
            raise InvalidArgumentError(f"{text!r} is not Base85")
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Z85 text of bytes whose length is a multiple of 4 (a UUID's 16 bytes: 20 characters)."""
    if len(data) % 4:
        raise InvalidArgumentError(f"Z85 encodes multiples of 4 bytes, not {len(data)}")
    out: list[str] = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85[digit])
        out.extend(reversed(chunk))
    return "".join(out)


def z85_uuid(text: str) -> str:
    """The UUID a deletion vector's 20-character Z85 id encodes."""
    if len(text) != 20:
        raise InvalidArgumentError(f"deletion vector id {text!r} is not 20 Base85 characters")
    return str(uuid.UUID(bytes=z85_decode(text)))


def dv_file(storage_type: str | None, path_or_inline: str | None) -> str | None:
    """The file a deletion vector descriptor points at (raw action path form), or None when
    inline. ``u``: ``<prefix><20-char id>`` -> ``<prefix>/deletion_vector_<uuid>.bin``."""
    if not storage_type or path_or_inline is None or storage_type == "i":
        return None
    if storage_type == "p":
        return path_or_inline
    if storage_type == "u":
        prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
        name = f"deletion_vector_{z85_uuid(encoded)}.bin"
        return f"{prefix}/{name}" if prefix else name
    raise InvalidArgumentError(f"unknown deletion vector storage type {storage_type!r}")


_PORTABLE = 1681511377
_NATIVE = 1681511376


def _bitmap_array(data: bytes, where: str) -> list[int]:
    """Row indexes of a serialized RoaringBitmapArray (magic included), ascending."""
    if len(data) < 4:
        raise CorruptLogError(f"deletion vector {where} is truncated")
    (magic,) = struct.unpack_from("<I", data, 0)
    rows: list[int] = []
    try:
        if magic == _PORTABLE:
            (count,) = struct.unpack_from("<Q", data, 4)
            position = 12
            for _ in range(count):
                (key,) = struct.unpack_from("<I", data, position)
                position += 4
                bitmap = BitMap.deserialize(data[position:])
                position += len(bitmap.serialize())
                rows.extend((key << 32) | v for v in bitmap)
        elif magic == _NATIVE:
            (count,) = struct.unpack_from("<I", data, 4)
            position = 8
            for key in range(count):
                bitmap = BitMap.deserialize(data[position:])
                position += len(bitmap.serialize())
                rows.extend((key << 32) | v for v in bitmap)
        else:
            raise CorruptLogError(f"deletion vector {where}: unknown format (magic {magic})")
    except (struct.error, ValueError) as exc:
        raise CorruptLogError(f"deletion vector {where} is not a valid bitmap: {exc}") from exc
    return rows


def deleted_rows(
    storage: Storage, dv: Mapping[str, Any], storage_options: Mapping[str, Any] | None = None
) -> list[int]:
    """Row indexes deleted by a descriptor (the ``deletionVector`` object of an ``add``). A
    vector file outside the table root (a shallow clone's ``p`` vectors name the source
    table's) is read through the storage for its own URI, with ``storage_options``."""
    kind = dv.get("storageType")
    ident = dv.get("pathOrInlineDv") or ""
    size = int(dv.get("sizeInBytes") or 0)
    if kind == "i":
        data = z85_decode(ident)[:size]
        rows = _bitmap_array(data, "(inline)")
    else:
        path = dv_file(kind, ident)
        assert path is not None
        relative = _relative(storage, path)
        if relative is None:
            parent, _, relative = decode_path(path).rpartition("/")
            storage = open_storage(parent or "/", storage_options)
        raw = storage.read(relative)
        offset = int(dv.get("offset") or 1)
        if len(raw) < offset + 4:
            raise CorruptLogError(f"deletion vector file {relative} is truncated")
        (length,) = struct.unpack_from(">I", raw, offset)
        data = raw[offset + 4 : offset + 4 + length]
        checksum = raw[offset + 4 + length : offset + 8 + length]
        if len(data) != length or len(checksum) != 4:
            raise CorruptLogError(f"deletion vector file {relative} is truncated")
        if struct.unpack(">I", checksum)[0] != zlib.crc32(data):
            raise CorruptLogError(f"deletion vector in {relative} fails its checksum")
        rows = _bitmap_array(data, relative)
    cardinality = dv.get("cardinality")
    if cardinality is not None and int(cardinality) != len(rows):
        raise CorruptLogError(
            f"deletion vector holds {len(rows)} rows, its descriptor says {cardinality}"
        )
    return rows


def _relative(storage: Storage, path: str) -> str | None:
    """The vector file's path under the table root, or None when it lies outside it."""
    decoded = decode_path(path)
    if not has_scheme(path) and not decoded.startswith("/"):
        return decoded
    root = storage.root_uri.rstrip("/")
    local = getattr(storage, "root_path", None)
    for prefix in (root, f"file://{local}", f"file:{local}", local):
        if prefix and decoded.startswith(prefix.rstrip("/") + "/"):
            return decoded[len(prefix.rstrip("/")) + 1 :]
    return None


def keep_mask(num_rows: int, deleted: list[int]) -> pa.Array:
    """A boolean mask over ``num_rows`` rows: False where the row is deleted."""
    mask = [True] * num_rows
    for row in deleted:
        if row >= num_rows:
            raise CorruptLogError(
                f"deletion vector deletes row {row} of a file with {num_rows} rows"
            )
        mask[row] = False
    return pa.array(mask, pa.bool_())


# -- writing -------------------------------------------------------------------------------------
DV_FILE_VERSION = 1


def deleted_bitmap(storage: Storage, dv: Mapping[str, Any] | None) -> BitMap64:
    """The rows a descriptor deletes as a 64-bit bitmap (empty for ``None``)."""
    return BitMap64(deleted_rows(storage, dv)) if dv else BitMap64()


def serialize_vector(rows: BitMap64) -> bytes:
    """A RoaringBitmapArray: the portable magic number, then the portable 64-bit bitmap."""
    rows = BitMap64(rows)
    rows.run_optimize()
    return struct.pack("<I", _PORTABLE) + rows.serialize()


@dataclass(frozen=True)
class WrittenVectors:
    """One deletion-vector file and the descriptors of the vectors in it, in the given order."""

    path: str  # relative to the table root
    descriptors: tuple[DeletionVector, ...]


def vector_file_bytes(vectors: Sequence[BitMap64]) -> tuple[bytes, list[tuple[int, int]]]:
    """The file holding ``vectors`` and each one's (offset of its size field, data size)."""
    out = bytearray([DV_FILE_VERSION])
    places: list[tuple[int, int]] = []
    for rows in vectors:
        data = serialize_vector(rows)
        places.append((len(out), len(data)))
        out += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return bytes(out), places


def write_vectors(storage: Storage, vectors: Sequence[BitMap64]) -> WrittenVectors:
    """Write ``vectors`` (non-empty bitmaps of row indexes) into one new file in the table root
    and describe them (storage type ``u``); nothing references the file until a commit does."""
    if not vectors or any(len(rows) == 0 for rows in vectors):
        raise InvalidArgumentError("deletion vectors to write must be non-empty")
    ident = uuid.uuid4()
    name = f"deletion_vector_{ident}.bin"
    data, places = vector_file_bytes(vectors)
    try:
        storage.write_new(name, data)
    except Exception as exc:  # a partial file may exist: nothing will ever reference it
        try:
            storage.delete(name)
        except Exception:
            if isinstance(exc, EngineError):
                exc.leave_files([name], "deleting the partly written vector file failed")
        raise
    encoded = z85_encode(ident.bytes)
    descriptors = tuple(
        DeletionVector(
            storage_type="u",
            path_or_inline_dv=encoded,
            offset=offset,
            size_in_bytes=size,
            cardinality=len(rows),
        )
        for rows, (offset, size) in zip(vectors, places, strict=True)
    )
    return WrittenVectors(name, descriptors)
