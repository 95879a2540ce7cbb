"""Builders for row-tracking tests: inline deletion vectors and DELETEs that write them.

deltalake cannot create row-tracking tables, so the tests make them with our engine
(``Table.create(..., properties={"delta.enableRowTracking": "true"})``) and delete rows by
committing an inline deletion vector the way Spark does (remove the file, re-add it with the
vector), which our engine numbers as a recommit of the same file.
"""

from __future__ import annotations

import struct
from typing import Any

from pyroaring import BitMap

from txntable.engine.model.actions import AddFile, Protocol
from txntable.engine.table import Table

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_PORTABLE_MAGIC = 1681511377


def _z85(data: bytes) -> str:
    data += b"\x00" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85[digit])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def inline_dv(rows: list[int]) -> dict[str, Any]:
    """An inline deletion vector descriptor (portable RoaringBitmapArray) deleting ``rows``."""
    data = struct.pack("<IQI", _PORTABLE_MAGIC, 1, 0) + BitMap(rows).serialize()
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85(data),
        "sizeInBytes": len(data),
        "cardinality": len(set(rows)),
    }


def with_deletion_vectors(table: Table) -> None:
    """Add the deletionVectors reader/writer feature to a table's protocol."""
    protocol = table.snapshot().protocol
    writer = [*(protocol.writer_features or ()), "deletionVectors"]
    reader = [*(protocol.reader_features or ()), "deletionVectors"]
    txn = table.transaction()
    txn.set_protocol(Protocol(3, 7, reader, writer))
    txn.commit("UPGRADE PROTOCOL")


def delete_rows(table: Table, path: str, rows: list[int]) -> int:
    """Delete ``rows`` (positions) of live file ``path`` with an inline deletion vector; the
    re-added file carries no row-tracking fields, so the engine must restore them."""
    live = next(a for a in table.snapshot().add_actions() if a.path == path)
    assert live.deletion_vector is None, "a file with a vector is not supported here"
    readd = {
        k: v for k, v in live.to_json().items() if k not in ("baseRowId", "defaultRowCommitVersion")
    }
    txn = table.transaction()
    txn.add(live.to_remove(deletion_timestamp=1, data_change=True))
    txn.add(AddFile.from_json({**readd, "deletionVector": inline_dv(rows), "dataChange": True}))
    return txn.commit("DELETE").version
