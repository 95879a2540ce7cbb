"""Per-file statistics (``add.stats``) as Delta readers expect them (PROTOCOL.md "Per-file
Statistics").

Readers skip files using ``minValues``/``maxValues``/``nullCount``, so a bound we write must be
a true bound: a file must never be skipped because we rounded the wrong way. Hence strings are
cut to a 32-character prefix with a tie-breaker appended to the max, timestamp maxima are rounded
*up* to the millisecond (Spark truncates and compensates when reading; other readers may not),
decimal bounds that do not fit a double exactly are widened outwards, and a NaN or infinite
bound is dropped rather than written as a token JSON does not allow.

Two sources: an Arrow table we write (``stats_for_table``, which takes the bounds the Parquet
writer computed from the new file's footer where it holds them: a compaction then computes no
bound twice) and the footer of a Parquet file someone else wrote (``stats_from_parquet``), for
adopting files into the log.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txntable.engine.errors import InvalidArgumentError

STRING_PREFIX_LENGTH = 32
DEFAULT_NUM_INDEXED_COLS = 32
_ASCII_TIE_BREAKER = "\x7f"
_MAX_TIE_BREAKER = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class StatsConfig:
    """Which columns get statistics: the first ``num_indexed_cols`` leaves (-1 = all), or an
    explicit list of (dotted) column names, which wins when given."""

    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    stats_columns: tuple[str, ...] | None = None

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, str]) -> StatsConfig:
        """Read ``delta.dataSkippingNumIndexedCols`` / ``delta.dataSkippingStatsColumns``."""
        explicit = configuration.get("delta.dataSkippingStatsColumns")
        if explicit is not None and explicit.strip():
            names = tuple(_unquote(n.strip()) for n in explicit.split(",") if n.strip())
            return cls(stats_columns=names)
        raw = configuration.get("delta.dataSkippingNumIndexedCols")
        if raw is None or not raw.strip():
            return cls()
        try:
            num = int(raw)
        except ValueError:
            raise InvalidArgumentError(
                f"delta.dataSkippingNumIndexedCols must be an integer, got {raw!r}"
            ) from None
        if num < -1:
            raise InvalidArgumentError(f"delta.dataSkippingNumIndexedCols must be >= -1, got {num}")
        return cls(num_indexed_cols=num)


def _unquote(name: str) -> str:
    return ".".join(part.strip("`") for part in name.split("."))


# -- choosing the leaves ----------------------------------------------------------------------


def _leaf_paths(
    schema: pa.Schema, config: StatsConfig, opaque: Collection[tuple[str, ...]] = ()
) -> list[tuple[str, ...]]:
    """Leaf column paths (struct fields recursed, except ``opaque`` ones) that get statistics,
    in schema order."""
    leaves: list[tuple[str, ...]] = []

    def walk(prefix: tuple[str, ...], field: pa.Field) -> None:
        path = (*prefix, field.name)
        if pa.types.is_struct(field.type) and path not in opaque:
            for i in range(field.type.num_fields):
                walk(path, field.type.field(i))
        else:
            leaves.append(path)

    for field in schema:
        walk((), field)
    if config.stats_columns is not None:
        wanted = [tuple(name.split(".")) for name in config.stats_columns]
        return [p for p in leaves if any(p[: len(w)] == w for w in wanted)]
    if config.num_indexed_cols < 0:
        return leaves
    return leaves[: config.num_indexed_cols]


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = value


# -- making bounds JSON-safe -------------------------------------------------------------------


def _truncate_min(value: str) -> str:
    return value[:STRING_PREFIX_LENGTH]


def _truncate_max(value: str) -> str | None:
    """A string >= ``value`` of about 32 characters; ``None`` when no shorter bound exists."""
    if len(value) <= STRING_PREFIX_LENGTH:
        return value
    if value[STRING_PREFIX_LENGTH] < _ASCII_TIE_BREAKER:
        return value[:STRING_PREFIX_LENGTH] + _ASCII_TIE_BREAKER
    for i in range(STRING_PREFIX_LENGTH, len(value)):
        if value[i] < _MAX_TIE_BREAKER:
            return value[:i] + _MAX_TIE_BREAKER
    return None  # a run of U+10FFFF to the end: keep no bound rather than a wrong one


def _iso_ms(value: dt.datetime, round_up: bool) -> str | None:
    """The bound to the millisecond; None when rounding up leaves the calendar (a maximum in
    the last millisecond of 9999: no bound is safe, a truncated one would be too small)."""
    micros = value.microsecond
    millis = micros // 1000
    if round_up and micros % 1000:
        try:
            value = value.replace(microsecond=0) + dt.timedelta(milliseconds=millis + 1)
        except OverflowError:
            return None
    else:
        value = value.replace(microsecond=millis * 1000)
    text = value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return text + "Z" if value.tzinfo is not None else text


def _json_bound(value: Any, is_max: bool) -> Any:
    """The JSON form of one bound, or ``None`` when no safe bound can be written."""
    if value is None or isinstance(value, bool | bytes):
        return None
    if isinstance(value, float):  # + 0.0 spells a zero bound 0.0 (Parquet's minimum is -0.0)
        return value + 0.0 if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        # Written as an exact JSON number (a double could round inside the bound).
        return _RawNumber(format(value, "f")) if value.is_finite() else None
    if isinstance(value, str):
        return _truncate_max(value) if is_max else _truncate_min(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return _iso_ms(value, round_up=is_max)
    if isinstance(value, dt.date):
        return value.isoformat()
    return None


def _has_min_max(arrow_type: pa.DataType) -> bool:
    """Types Delta collects min/max for (Spark's list; booleans and binary only get counts)."""
    return bool(
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_decimal(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_string_view(arrow_type)
        or pa.types.is_date(arrow_type)
        or pa.types.is_timestamp(arrow_type)
    )


class _RawNumber(str):
    """A number token written verbatim into the JSON (exact decimals)."""


_MARKED = re.compile(r'"([0-9a-f]{32}):(-?[0-9.]+)"')


def _dumps(stats: dict[str, Any]) -> str:
    raw_numbers = False
    token = uuid.uuid4().hex  # fresh per call, so no data value can imitate the marker

    def mark(value: Any) -> Any:
        nonlocal raw_numbers
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, _RawNumber):
            raw_numbers = True
            return f"{token}:{value}"
        return value

    marked = mark(stats)
    text = json.dumps(marked, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    if not raw_numbers:
        return text
    return _MARKED.sub(lambda m: m[2] if m[1] == token else m[0], text)


# -- from Arrow ---------------------------------------------------------------------------------


def _column(data: pa.Table, path: tuple[str, ...]) -> pa.ChunkedArray:
    """A leaf column with the nulls of its parent structs folded in."""
    column = data.column(path[0])
    for name in path[1:]:
        chunks = [pc.struct_field(chunk, name) for chunk in column.chunks]
        # struct_field ignores the parent's validity; a null parent makes the child null.
        parent_valid = [chunk.is_valid() for chunk in column.chunks]
        chunks = [
            pc.if_else(valid, child, pa.scalar(None, child.type))
            for valid, child in zip(parent_valid, chunks, strict=True)
        ]
        column = pa.chunked_array(chunks, type=column.type.field(name).type)
    return column


def stats_for_table(
    data: pa.Table,
    schema_fields: Sequence[Any] | None = None,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
    *,
    config: StatsConfig | None = None,
    opaque: Collection[tuple[str, ...]] = (),
    footer: pq.FileMetaData | None = None,
) -> str:
    """Delta stats JSON for ``data`` (the columns of one data file, partition columns removed).

    ``schema_fields`` is accepted for interface symmetry with the table schema; the Arrow schema
    of ``data`` decides the leaves. ``config`` (from the table properties) overrides
    ``num_indexed_cols``. ``opaque`` names columns that get a null count and no bounds: struct
    columns that are one value each (``variant`` columns, a struct of two binaries in the file)
    and strings whose collation orders them otherwise than their bytes.

    ``footer`` is the footer of the file ``data`` was just written as (its leading columns):
    the bounds the Parquet writer computed on the way are taken from it instead of computed
    again, the same values (a test holds the two sources equal); a column whose footer bounds
    are missing (a string over the writer's 4 KiB statistics limit, NaN, nanoseconds) or do
    not line up is computed from ``data``.
    """
    del schema_fields
    cfg = config or StatsConfig(num_indexed_cols=num_indexed_cols)
    written = _FooterBounds(footer, data) if footer is not None else None
    stats: dict[str, Any] = {"numRecords": data.num_rows}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    unbounded = frozenset(opaque)
    for path in _leaf_paths(data.schema, cfg, unbounded):
        column = _column(data, path)
        _put(nulls, path, column.null_count)
        if (
            path in unbounded
            or not _has_min_max(column.type)
            or column.null_count == column.length()
        ):
            continue
        found = written.get(path, column.type) if written is not None else None
        if found is None:
            bounds = pc.min_max(column)
            found = bounds["min"].as_py(), bounds["max"].as_py()
        low_value, high_value = found
        if pa.types.is_floating(column.type) and _nan(low_value, high_value):
            continue  # NaN is no bound: min_max skips it, and gives NaN only when all are NaN
        low = _json_bound(low_value, is_max=False)
        high = _json_bound(high_value, is_max=True)
        if low is not None:
            _put(mins, path, low)
        if high is not None:
            _put(maxs, path, high)
    if mins:
        stats["minValues"] = mins
    if maxs:
        stats["maxValues"] = maxs
    stats["nullCount"] = nulls
    return _dumps(stats)


def _nan(*values: Any) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in values)


class _FooterBounds:
    """Column bounds of a file just written, from its footer, by leaf path of ``data``.

    A path's Parquet column is found by counting leaves through ``data``'s schema and then
    checked by name, so a column that does not line up is never read for another's bounds."""

    def __init__(self, meta: pq.FileMetaData, data: pa.Table) -> None:
        self.meta = meta
        self.usable = meta.num_rows == data.num_rows
        self.columns: dict[tuple[str, ...], int] = {}
        first = 0
        for field in data.schema:
            first = self._index(((field.name,), field.type), first)

    def _index(self, leaf: tuple[tuple[str, ...], pa.DataType], first: int) -> int:
        """Record the Parquet column of ``leaf`` (path, type) and of its struct fields; the
        first column after them."""
        path, arrow_type = leaf
        if pa.types.is_struct(arrow_type):
            for i in range(arrow_type.num_fields):
                child = arrow_type.field(i)
                first = self._index(((*path, child.name), child.type), first)
            return first
        self.columns[path] = first
        return first + _parquet_leaves(arrow_type)

    def get(self, path: tuple[str, ...], arrow_type: pa.DataType) -> tuple[Any, Any] | None:
        """(min, max) of ``path`` as Python values, or None where the footer cannot say."""
        col = self.columns.get(path)
        if not self.usable or col is None or col >= self.meta.num_columns:
            return None
        if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns":
            return None  # a Python datetime holds microseconds
        if self.meta.schema.column(col).path != ".".join(path):
            return None
        low, high, _ = _combine_row_groups(self.meta, col)
        if low is None or high is None:
            return None
        return low, high


def _parquet_leaves(arrow_type: pa.DataType) -> int:
    """How many Parquet columns a column of ``arrow_type`` is written as."""
    if pa.types.is_struct(arrow_type):
        return sum(_parquet_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_map(arrow_type):
        return _parquet_leaves(arrow_type.key_type) + _parquet_leaves(arrow_type.item_type)
    if (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
        or pa.types.is_list_view(arrow_type)
        or pa.types.is_large_list_view(arrow_type)
    ):
        return _parquet_leaves(arrow_type.value_type)
    if pa.types.is_dictionary(arrow_type):
        return _parquet_leaves(arrow_type.value_type)
    if isinstance(arrow_type, pa.ExtensionType):
        return _parquet_leaves(arrow_type.storage_type)
    return 1


# -- from a Parquet footer --------------------------------------------------------------------


def stats_from_parquet(
    meta: pq.FileMetaData,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
    *,
    config: StatsConfig | None = None,
    exclude: Sequence[str] = (),
) -> str:
    """Delta stats JSON from a Parquet footer (files written by others, e.g. Spark).

    Row-group statistics are combined; a column whose bounds are missing in any row group gets
    no min/max, and one whose null count is missing gets no ``nullCount``. ``exclude`` names
    top-level columns (partition columns some writers also store in the file) to leave out.
    """
    cfg = config or StatsConfig(num_indexed_cols=num_indexed_cols)
    arrow_schema = meta.schema.to_arrow_schema()
    arrow_schema = pa.schema([f for f in arrow_schema if f.name not in set(exclude)])
    wanted = _leaf_paths(arrow_schema, cfg)
    leaf_types = {path: _leaf_type(arrow_schema, path) for path in wanted}
    index = {tuple(meta.schema.column(i).path.split(".")): i for i in range(meta.num_columns)}
    stats: dict[str, Any] = {"numRecords": meta.num_rows}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for path in wanted:
        col = index.get(path)
        if col is None:
            continue  # a list/map leaf: Parquet stores it under a deeper path
        low, high, null_count = _combine_row_groups(meta, col)
        if null_count is not None:
            _put(nulls, path, null_count)
        if not _has_min_max(leaf_types[path]):
            continue
        low_json = _json_bound(low, is_max=False)
        high_json = _json_bound(high, is_max=True)
        if low_json is not None and high_json is not None:
            _put(mins, path, low_json)
            _put(maxs, path, high_json)
    if mins:
        stats["minValues"] = mins
    if maxs:
        stats["maxValues"] = maxs
    if nulls:
        stats["nullCount"] = nulls
    return _dumps(stats)


def _leaf_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType:
    arrow_type = schema.field(path[0]).type
    for name in path[1:]:
        arrow_type = arrow_type.field(name).type
    return arrow_type


def _combine_row_groups(meta: pq.FileMetaData, col: int) -> tuple[Any, Any, int | None]:
    low: Any = None
    high: Any = None
    null_count: int | None = 0
    bounds_ok = True
    for rg in range(meta.num_row_groups):
        chunk = meta.row_group(rg).column(col)
        if meta.row_group(rg).num_rows == 0:
            continue
        st = chunk.statistics
        if st is None:
            return None, None, None
        if null_count is not None:
            null_count = null_count + st.null_count if st.has_null_count else None
        if not st.has_min_max:
            if st.has_null_count and st.null_count == meta.row_group(rg).num_rows:
                continue  # all null: no bound needed from this group
            bounds_ok = False
            continue
        try:
            lo, hi = st.min, st.max
        except (ValueError, TypeError):  # undecodable logical value
            bounds_ok = False
            continue
        if _is_nan(lo) or _is_nan(hi):
            bounds_ok = False
            continue
        low = lo if low is None or lo < low else low
        high = hi if high is None or hi > high else high
    if not bounds_ok:
        low = high = None
    return low, high, null_count


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
