"""Arrow rows in the canonical form the delta-spark server answers with, and their digest.

A test knows the rows it wrote (Arrow tables) and asks delta-spark what it reads; both sides
render each value the same way (``tests/deltaspark/server.py``, ``canon``): timestamps as UTC ISO
strings without zone, dates ISO, decimals as ``str``, binary as hex, maps as sorted ``[key, value]``
pairs, structs as objects, non-finite floats as their ``repr``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa


def canon(value: Any, dtype: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_struct(dtype):
        return {
            dtype.field(i).name: canon(value.get(dtype.field(i).name), dtype.field(i).type)
            for i in range(dtype.num_fields)
        }
    if pa.types.is_map(dtype):
        pairs = [[canon(k, dtype.key_type), canon(v, dtype.item_type)] for k, v in value]
        return sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [canon(v, dtype.value_type) for v in value]
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return value


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows, canonical."""
    fields = list(table.schema)
    return [
        {f.name: canon(r[f.name], f.type) for f in fields}
        for r in table.to_pylist()  # to_pylist keeps maps as (key, value) tuples
    ]


def digest(rows: Iterable[dict[str, Any]]) -> str:
    """SHA-1 of the sorted JSON lines; the server's ``digest`` of the same rows."""
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()
