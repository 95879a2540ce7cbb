"""Z-order keys: cluster rows so that rows close in several columns land in the same file.

Each column is rank-normalised first (dense rank over the rows being clustered, nulls last), so
the key does not depend on the column's type or value distribution: strings, dates, decimals and
skewed numbers all spread over the same integer range. The ranks are scaled to ``64 // k`` bits
(at most 32) for ``k`` columns and their bits interleaved into one unsigned 64-bit key, most
significant bits first, which is the Morton (Z) curve. Everything is vectorised with Arrow
compute kernels (one rank per column, then ``bits * k`` shift/and/or kernels over whole arrays),
so no NumPy dependency is needed.

Ranks over the rows at hand need all of a bin's rows in one place. For a bin spread over many
tasks (``maintenance.zorder_spark``) the key must not depend on which rows a task holds, so each
column is bucketed by boundaries taken once from a sample of the whole bin
(``column_boundaries``: every distinct value when there are few, else equi-depth quantiles), and
``global_zorder_key`` interleaves those bucket numbers. Cutting the key space into ranges
(``range_splits``, ``range_ids``) uses the same sample's keys, as Spark's range partitioner does.
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
    values = _orderable(values)
    if len(values) == 0:
        return pa.array([], pa.uint64())
    try:
        ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}") from exc
    r = pc.subtract(ranks.cast(pa.uint64()), pa.scalar(1, pa.uint64()))
    return _stretch(r, int(pc.max(r).as_py() or 0), bits)


def _stretch(r: pa.Array, top: int, bits: int) -> pa.Array:
    """Ranks ``0..top`` stretched (or, with more ranks than the key holds, squeezed) over the
    whole ``[0, 2**bits)``, keeping the order: a column with few distinct values must weigh as
    much in the key's high bits as one with many, or the key would sort by the latter alone."""
    span = 1 << bits
    if top in (0, span - 1):
        return r
    scaled = pc.floor(pc.multiply(r.cast(pa.float64()), (span - 1) / top))
    top_value = pa.scalar(span - 1, pa.uint64())
    return pc.min_element_wise(scaled.cast(pa.uint64(), safe=False), top_value)


def _orderable(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one plain array a sort accepts; refuses types that have no order."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_nested(values.type) or pa.types.is_null(values.type):
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}")
    return values


def _sort_indices(values: pa.Array) -> pa.Array:
    try:
        return pc.sort_indices(values)  # nulls last (Arrow's default)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}") from exc


#: at most this many buckets per column in a bin-wide key: 4,096 equi-depth slices of a column are
#: far finer than any output file's share of it, and every task sorts the boundaries with its rows
MAX_BUCKETS = 1 << 12


def column_boundaries(
    sample: pa.Array | pa.ChunkedArray, bits: int, max_buckets: int = MAX_BUCKETS
) -> pa.Array:
    """Sorted values that cut a column into buckets, from a ``sample`` of the whole bin: every
    distinct value when they fit (the buckets are then the dense ranks), else equi-depth
    quantiles, so each bucket holds about as many rows. Nulls are left out (they sort last)."""
    values = _orderable(sample)
    values = values.filter(pc.is_valid(values))
    limit = max(1, min(1 << bits, max_buckets) - 1)  # bucket numbers 0..limit+1 incl. nulls
    ordered = values.take(_sort_indices(values))
    distinct = pc.unique(ordered)  # in order of first appearance: sorted
    if len(distinct) <= limit:
        return distinct
    n = len(ordered)
    positions = pa.array([(i * n) // (limit + 1) for i in range(1, limit + 1)], pa.int64())
    return pc.unique(ordered.take(positions))


def bucketize(
    values: pa.Array | pa.ChunkedArray, boundaries: pa.Array, *, right: bool = True
) -> pa.Array:
    """For each value, how many ``boundaries`` (sorted) are ``<=`` it (``right``) or ``<`` it;
    a null counts every boundary (as uint64). Arrow has no binary search, so the values and the
    boundaries are sorted together and the boundaries counted along the way."""
    values = _orderable(values)
    n, nb = len(values), len(boundaries)
    if n == 0:
        return pa.array([], pa.uint64())
    if nb == 0:
        return pa.repeat(pa.scalar(0, pa.uint64()), n)
    if nb <= _FEW_BOUNDARIES and pa.types.is_integer(values.type):  # e.g. keys against splits
        return _count_boundaries(values, boundaries, right)
    both = pa.table(
        {
            "v": pa.concat_arrays([_orderable(boundaries).cast(values.type), values]),
            "b": pa.concat_arrays(
                [pa.repeat(pa.scalar(1, pa.int64()), nb), pa.repeat(pa.scalar(0, pa.int64()), n)]
            ),
        }
    )
    # ties: a boundary equal to a value counts for it (right) when it sorts before it
    tie = "descending" if right else "ascending"
    try:
        order = pc.sort_indices(both, sort_keys=[("v", "ascending"), ("b", tie)])  # nulls last
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPolicyError(f"cannot Z-order by a column of type {values.type}") from exc
    counted = pc.cumulative_sum(both.column("b").take(order)).combine_chunks()
    is_value = pc.greater_equal(order, pa.scalar(nb, pa.uint64()))
    row = pc.subtract(order.filter(is_value), pa.scalar(nb, pa.uint64()))
    buckets = counted.filter(is_value).cast(pa.uint64())
    return buckets.take(pc.sort_indices(row))  # back to the values' own order


#: up to this many boundaries, integers are bucketed by one comparison per boundary (cheaper
#: than sorting the values)
_FEW_BOUNDARIES = 64


def _count_boundaries(values: pa.Array, boundaries: pa.Array, right: bool) -> pa.Array:
    compare = pc.greater_equal if right else pc.greater
    count = pa.repeat(pa.scalar(0, pa.uint64()), len(values))
    for bound in boundaries.cast(values.type):
        passed = pc.fill_null(compare(values, bound), True)  # a null counts every boundary
        count = pc.add(count, passed.cast(pa.uint64()))
    return count


def global_zorder_key(
    table: pa.Table, columns: Sequence[str], boundaries: Sequence[pa.Array]
) -> pa.Array:
    """The Z-order key (uint64) of every row over ``columns``, each column bucketed by its
    ``boundaries`` (``column_boundaries`` of a bin-wide sample): the same row gets the same key
    in whatever task it is, so keys of different tasks order the whole bin."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InvalidPolicyError(f"Z-order column(s) not in the data: {', '.join(missing)}")
    if len(boundaries) != len(columns):
        raise InvalidPolicyError(f"{len(columns)} Z-order columns but {len(boundaries)} bounds")
    bits = bits_per_column(len(columns))
    ranks = []
    for name, bounds in zip(columns, boundaries, strict=True):
        values = table.column(name)
        buckets = bucketize(values, bounds)
        null_bucket = pa.scalar(len(bounds) + 1, pa.uint64())
        buckets = pc.if_else(pc.is_null(_orderable(values)), null_bucket, buckets)
        ranks.append(_stretch(buckets, len(bounds) + 1, bits))
    if table.num_rows == 0:
        return pa.array([], pa.uint64())
    return interleave(ranks, bits)


def range_splits(keys: pa.Array, ranges: int) -> pa.Array:
    """``ranges - 1`` keys cutting ``keys`` (a sample of the bin's keys) into ``ranges`` parts
    of about equal row counts; a key so frequent that it fills several parts repeats."""
    if ranges <= 1 or len(keys) == 0:
        return pa.array([], pa.uint64())
    ordered = keys.take(pc.sort_indices(keys))
    n = len(ordered)
    return ordered.take(pa.array([(i * n) // ranges for i in range(1, ranges)], pa.int64()))


def range_ids(keys: pa.Array, splits: pa.Array) -> pa.Array:
    """The range (0-based, int32) of every key: range ``i`` holds keys above split ``i-1`` and
    up to split ``i``. Rows of a key that repeats in ``splits`` are dealt round-robin over the
    ranges it spans, so one very frequent key cannot make one range (one file) hold it all."""
    if len(keys) == 0:
        return pa.array([], pa.int32())
    below = bucketize(keys, splits, right=False)
    width = pc.add(pc.subtract(bucketize(keys, splits, right=True), below), 1)
    position = pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.uint64()), len(keys)))
    spread = pc.subtract(position, pc.multiply(pc.divide(position, width), width))
    return pc.add(below, spread).cast(pa.int32())


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
