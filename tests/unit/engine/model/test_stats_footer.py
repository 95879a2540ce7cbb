"""A compaction takes its files' bounds from the footer the Parquet writer just wrote; those
statistics must be exactly the ones computed from the rows, on every shape of column.

Each case writes a table with the writer our compactions use and compares the stats JSON from
the footer with the stats JSON computed from the Arrow rows: the same string, byte for byte.
"""

from __future__ import annotations

import datetime as dt
import io
import random
from collections.abc import Callable
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import TESTDATA
from txntable.engine.model.stats import StatsConfig, stats_for_table
from txntable.engine.write.parquet_options import ParquetWriteOptions


def _footer(data: pa.Table, row_group_rows: int, dictionary: str = "auto") -> pq.FileMetaData:
    sink = io.BytesIO()
    options = ParquetWriteOptions(row_group_rows=row_group_rows, dictionary=dictionary)
    return options.write(data, sink)


def _assert_same(data: pa.Table, **kwargs: object) -> None:
    computed = stats_for_table(data, **kwargs)  # type: ignore[arg-type]
    for rows in (3, 1_048_576):
        for dictionary in ("auto", "off"):
            footer = _footer(data, rows, dictionary)
            assert stats_for_table(data, footer=footer, **kwargs) == computed  # type: ignore[arg-type]


def _with_nulls(values: list[object], rng: random.Random) -> list[object]:
    return [None if rng.random() < 0.2 else v for v in values]


def test_numbers_dates_and_decimals() -> None:
    rng = random.Random(7)

    def column(draw: Callable[[], object], arrow_type: pa.DataType, *edges: object) -> pa.Array:
        values = [*edges, *(draw() for _ in range(50 - len(edges)))]
        return pa.array(_with_nulls(values, rng), arrow_type)

    def decimals(digits: int, scale: int) -> Callable[[], Decimal]:
        return lambda: Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-scale)

    day = dt.date(2020, 1, 1)
    data = pa.table(
        {
            "i8": column(lambda: rng.randint(-128, 127), pa.int8(), -128, 127),
            "i16": column(lambda: rng.randint(-(2**15), 2**15 - 1), pa.int16()),
            "i32": column(lambda: rng.randint(-(2**31), 2**31 - 1), pa.int32()),
            "i64": column(lambda: rng.randint(-9, 9), pa.int64(), -(2**63), 2**63 - 1),
            "f32": column(lambda: rng.uniform(-1e6, 1e6), pa.float32()),
            "f64": column(lambda: rng.uniform(-1e300, 1e300), pa.float64()),
            "d": column(
                lambda: day + dt.timedelta(days=rng.randint(-9999, 9999)),
                pa.date32(),
                dt.date(1, 1, 1),
                dt.date(9999, 12, 31),
            ),
            "dec5": column(decimals(5, 2), pa.decimal128(5, 2)),
            "dec18": column(decimals(18, 6), pa.decimal128(18, 6)),
            "dec38": column(decimals(38, 10), pa.decimal128(38, 10)),
        }
    )
    _assert_same(data)


@pytest.mark.parametrize(
    "values",
    [
        [0.0, 1.0, None],
        [-0.0, 0.0],
        [-0.0, -1.0],
        [float("nan"), 1.0, -2.5],
        [float("nan"), float("nan")],
        [float("nan"), None],
        [float("inf"), 1.0],
        [float("-inf"), float("inf")],
        [None, None],
    ],
    ids=[
        *("zero", "signed-zeros", "negative-zero-max", "nan", "all-nan", "nan-null"),
        *("inf", "infs", "nulls"),
    ],
)
def test_floats_with_zeros_nan_and_infinities(values: list[float | None]) -> None:
    for arrow_type in (pa.float32(), pa.float64()):
        floats = pa.array(values * 3, arrow_type)
        _assert_same(pa.table({"f": floats, "k": list(range(len(floats)))}))


def test_strings_around_the_prefix_and_the_writers_statistics_limit() -> None:
    lengths = [0, 1, 31, 32, 33, 100, 1365, 1366, 4095, 4096, 4097, 10_000]
    words = [c * n for c in ("a", "é") for n in lengths] + ["😀" * n for n in (8, 1024, 1025)]
    words += ["\U0010ffff" * 40, "b" * 32 + "\U0010ffff" * 8, "z" * 31 + "\x7f" * 5, "z" * 33]
    rng = random.Random(3)
    for _ in range(5):
        shuffled = words[:]
        rng.shuffle(shuffled)
        data = pa.table(
            {
                "s": pa.array(_with_nulls(shuffled, rng), pa.string()),
                "ls": pa.array(shuffled, pa.large_string()),
                "short": pa.array([w[:40] for w in shuffled], pa.string()),
            }
        )
        _assert_same(data)


def test_timestamps_with_and_without_zone() -> None:
    rng = random.Random(11)
    base = dt.datetime(2020, 6, 1, 12, 0, 0)
    moments = [base + dt.timedelta(microseconds=rng.randint(-(10**15), 10**15)) for _ in range(40)]
    moments += [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)]
    data = pa.table(
        {
            "ntz": pa.array(_with_nulls(moments, rng), pa.timestamp("us")),
            "utc": pa.array(_with_nulls(moments, rng), pa.timestamp("us", tz="UTC")),
            "zoned": pa.array([*moments[:40], None, None], pa.timestamp("us", tz="Asia/Kolkata")),
            "ms": pa.array([*_with_nulls(moments[:40], rng), None, None], pa.timestamp("ms")),
            "ns": pa.array([base + dt.timedelta(seconds=i) for i in range(42)], pa.timestamp("ns")),
        }
    )
    _assert_same(data)


def test_structs_lists_maps_and_count_only_types() -> None:
    deep = pa.struct([("y", pa.float64())])
    inner = pa.struct([("x", pa.int32()), ("s", pa.string()), ("deep", deep)])
    rows = [
        {"x": 1, "s": "b", "deep": {"y": 2.0}},
        None,
        {"x": None, "s": "a", "deep": None},
        {"x": 7, "s": None, "deep": {"y": None}},
    ] * 4
    data = pa.table(
        {
            "l": pa.array([[1, None], None, [], [3]] * 4, pa.list_(pa.int64())),
            "st": pa.array(rows, inner),
            "m": pa.array(
                [[("k", 1)], None, [], [("j", None)]] * 4, pa.map_(pa.string(), pa.int8())
            ),
            "after": pa.array(["q", None, "p", "r"] * 4),
            "flag": pa.array([True, None, False, True] * 4),
            "blob": pa.array([b"\x00", None, b"\xff", b""] * 4),
            "ls": pa.array(
                [[{"x": 1}], None, [], [None]] * 4, pa.list_(pa.struct([("x", pa.int8())]))
            ),
            "last": pa.array([4, 3, None, 1] * 4, pa.int16()),
        }
    )
    _assert_same(data)
    _assert_same(data, config=StatsConfig(num_indexed_cols=-1))
    _assert_same(data, config=StatsConfig(stats_columns=("st.deep.y", "last")))
    _assert_same(data, opaque=[("st",), ("after",)])


def test_no_rows() -> None:
    data = pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    _assert_same(data)


def test_names_with_dots_and_spaces() -> None:
    data = pa.table(
        {
            "a.b": [3, 1, None],
            "a": pa.array([{"b": 5}, {"b": 2}, None], pa.struct([("b", pa.int64())])),
            "with space": ["x", "y", "z"],
        }
    )
    _assert_same(data)


def test_every_reference_tables_data_files() -> None:
    """The files Spark and delta-rs wrote, read and written again as a compaction writes them."""
    files = [p for p in sorted(TESTDATA.rglob("*.parquet")) if "_delta_log" not in p.parts]
    assert len(files) > 20
    for path in files:
        data = pq.read_table(path)
        _assert_same(data)


def test_the_footer_is_what_is_read() -> None:
    """The footer's bounds are used, not recomputed: a footer of other rows of the same shape
    gives that file's bounds (never done in the product; it shows the path is live)."""
    written = pa.table({"a": [10, 20, 30], "s": ["m", "n", "o"]})
    other = pa.table({"a": [1, 2, 3], "s": ["a", "b", "c"]})
    footer = _footer(written, 1_048_576)
    assert stats_for_table(other, footer=footer) == stats_for_table(written)


def test_a_footer_that_does_not_line_up_is_not_read() -> None:
    written = pa.table({"b": [10, 20, 30], "a": ["m", "n", "o"]})
    other = pa.table({"a": [1, 2, 3], "s": ["a", "b", "c"]})
    footer = _footer(written, 1_048_576)
    assert stats_for_table(other, footer=footer) == stats_for_table(other)
    fewer_rows = pa.table({"b": [1, 2], "a": ["a", "b"]})
    assert stats_for_table(fewer_rows, footer=footer) == stats_for_table(fewer_rows)
