"""Z-order keys: cluster rows so that rows close in several columns land in the same file.

Each column is rank-normalised first (dense rank over the rows being clustered, nulls last), so
the key does not depend on the column's type or value distribution: strings, dates, decimals and
skewed numbers all spread over the same integer range. The ranks are scaled to ``64 // k`` bits
(at most 32) for ``k`` columns and their bits interleaved into one unsigned 64-bit key, most
significant bits first, which is the Morton (Z) curve. Everything is vectorised with Arrow
compute kernels (one rank per column, then ``bits * k`` shift/and/or kernels over whole arrays),
so no NumPy dependency is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from txntable.maintenance.errors import InvalidPolicyError

KEY_BITS = 64


def bits_per_column(num_columns: int) -> int:
    """Bits each column gets in a 64-bit key (32 at most)."""
    if num_columns <= 0:
        raise InvalidPolicyError("Z-order needs at least one column")
    return min(32, KEY_BITS // num_columns)


def normalised_ranks(values: pa.Array | pa.ChunkedArray, bits: int) -> pa.Array:
    """Dense ranks of ``values`` scaled into ``[0, 2**bits)`` as uint64 (equal values, equal
    rank; order preserved)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if len(values) == 0:
        return pa.array([], pa.uint64())
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_nested(values.type) or pa.types.is_null(values.type):
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}")
    try:
        ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}") from exc
    r = pc.subtract(ranks.cast(pa.uint64()), pa.scalar(1, pa.uint64()))
    top = int(pc.max(r).as_py() or 0)
    span = 1 << bits
    if top in (0, span - 1):
        return r
    # stretch (or, with more distinct values than the key holds, squeeze) the ranks over the
    # whole range, keeping the order: a column with few distinct values must weigh as much in
    # the key's high bits as one with many, or the key would sort by the latter alone
    scaled = pc.floor(pc.multiply(r.cast(pa.float64()), (span - 1) / top))
    top_value = pa.scalar(span - 1, pa.uint64())
    return pc.min_element_wise(scaled.cast(pa.uint64(), safe=False), top_value)


def interleave(columns: Sequence[pa.Array], bits: int) -> pa.Array:
    """Morton key: bit ``b`` of column ``c`` goes to key bit ``b * k + (k - 1 - c)``, so the
    first column is the most significant within each bit plane."""
    k = len(columns)
    if k == 0:
        raise InvalidPolicyError("Z-order needs at least one column")
    if bits * k > KEY_BITS:
        raise InvalidPolicyError(f"{k} columns x {bits} bits do not fit a 64-bit key")
    cols = [c.cast(pa.uint64()) for c in columns]
    key = pa.repeat(pa.scalar(0, pa.uint64()), len(cols[0]))
    one = pa.scalar(1, pa.uint64())
    for b in range(bits):
        shift = pa.scalar(b, pa.uint64())
        for c, col in enumerate(cols):
            bit = pc.bit_wise_and(pc.shift_right(col, shift), one)
            target = pa.scalar(b * k + (k - 1 - c), pa.uint64())
            key = pc.bit_wise_or(key, pc.shift_left(bit, target))
    return key


def zorder_key(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The Z-order key (uint64) of every row of ``table`` over ``columns``."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InvalidPolicyError(f"Z-order column(s) not in the data: {', '.join(missing)}")
    bits = bits_per_column(len(columns))
    ranks = [normalised_ranks(table.column(c), bits) for c in columns]
    return interleave(ranks, bits)


def zorder_sort(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` with its rows ordered by the Z-order key over ``columns`` (stable)."""
    if table.num_rows < 2:
        return table
    key = zorder_key(table, columns)
    order = pc.sort_indices(key)
    return table.take(order)
