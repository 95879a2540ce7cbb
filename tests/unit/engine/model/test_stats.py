"""Delta statistics we write must be true bounds, valid JSON, and shaped like Spark's."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.stats import StatsConfig, stats_for_table, stats_from_parquet


def _stats(data: pa.Table, **kwargs: object) -> dict[str, object]:
    text = stats_for_table(data, **kwargs)  # type: ignore[arg-type]
    assert "NaN" not in text and "Infinity" not in text
    return json.loads(text)  # type: ignore[no-any-return]


def test_numbers_strings_and_null_counts() -> None:
    data = pa.table({"a": [3, 1, None], "s": ["b", None, "a"]})
    assert _stats(data) == {
        "numRecords": 3,
        "minValues": {"a": 1, "s": "a"},
        "maxValues": {"a": 3, "s": "b"},
        "nullCount": {"a": 1, "s": 1},
    }


def test_all_null_column_has_only_a_null_count() -> None:
    data = pa.table({"a": pa.array([None, None], pa.int64())})
    assert _stats(data) == {"numRecords": 2, "nullCount": {"a": 2}}


def test_nested_struct_leaves_and_parent_nulls() -> None:
    typ = pa.struct([("x", pa.int32()), ("y", pa.string())])
    data = pa.table({"st": pa.array([{"x": 5, "y": "q"}, None, {"x": None, "y": "r"}], typ)})
    stats = _stats(data)
    assert stats["minValues"] == {"st": {"x": 5, "y": "q"}}
    assert stats["maxValues"] == {"st": {"x": 5, "y": "r"}}
    assert stats["nullCount"] == {"st": {"x": 2, "y": 1}}


def test_long_strings_are_truncated_and_max_stays_an_upper_bound() -> None:
    long_value = "m" * 40
    high_value = "z" * 32 + "\U0010ffff" + "zz"
    data = pa.table({"s": [long_value, high_value]})
    stats = _stats(data)
    low, high = stats["minValues"]["s"], stats["maxValues"]["s"]  # type: ignore[index]
    assert low == "m" * 32 and low <= long_value
    assert len(high) <= 36 and high >= high_value
    only_ascii = _stats(pa.table({"s": [long_value]}))
    assert only_ascii["maxValues"] == {"s": "m" * 32 + "\x7f"}


def test_nan_and_infinity_are_never_written() -> None:
    data = pa.table({"f": [1.5, float("nan"), float("inf")], "g": [float("nan")] * 3})
    stats = _stats(data)
    assert stats["minValues"] == {"f": 1.5}
    assert "maxValues" not in stats
    assert stats["nullCount"] == {"f": 0, "g": 0}


@pytest.mark.parametrize("kind", [pa.float64(), pa.float32()])
def test_nan_is_never_a_bound_whatever_the_chunks(kind: pa.DataType) -> None:
    """The bounds are those of the values that are neither NaN nor null, found in one pass;
    chunks of NaN only, nulls and infinities change nothing of that."""
    import random

    rng = random.Random(7)
    nan = float("nan")
    for _ in range(200):
        chunks = [
            [rng.choice([nan, None, rng.uniform(-5, 5), float("inf")]) for _ in range(n)]
            for n in (rng.randint(0, 4) for _ in range(rng.randint(1, 4)))
        ]
        column = pa.chunked_array([pa.array(c, kind) for c in chunks], kind)
        got = _stats(pa.table({"f": column}))
        real = [v for c in chunks for v in c if v is not None and v == v]
        if not real:
            assert "f" not in got.get("minValues", {}) and "f" not in got.get("maxValues", {})
            continue
        low, high = min(real), max(real)
        if low != float("inf"):  # infinities are not written either
            assert got["minValues"]["f"] == pytest.approx(low, rel=1e-6)
        if high != float("inf"):
            assert got["maxValues"]["f"] == pytest.approx(high, rel=1e-6)


def test_timestamps_are_iso_milliseconds_with_max_rounded_up() -> None:
    ts = dt.datetime(2024, 1, 1, 1, 2, 3, 456789)
    data = pa.table(
        {
            "tz": pa.array([ts], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([ts], pa.timestamp("us")),
            "d": pa.array([ts.date()]),
        }
    )
    stats = _stats(data)
    assert stats["minValues"] == {
        "tz": "2024-01-01T01:02:03.456Z",
        "ntz": "2024-01-01T01:02:03.456",
        "d": "2024-01-01",
    }
    assert stats["maxValues"] == {
        "tz": "2024-01-01T01:02:03.457Z",
        "ntz": "2024-01-01T01:02:03.457",
        "d": "2024-01-01",
    }


def test_decimals_are_exact_numbers() -> None:
    data = pa.table({"d": pa.array([Decimal("1.23"), Decimal("-123.45")], pa.decimal128(5, 2))})
    text = stats_for_table(data)
    assert '"minValues":{"d":-123.45}' in text and '"maxValues":{"d":1.23}' in text


def test_booleans_and_binary_get_counts_only() -> None:
    data = pa.table({"b": [True, None], "bin": [b"x", b"y"]})
    assert _stats(data) == {"numRecords": 2, "nullCount": {"b": 1, "bin": 0}}


def test_column_selection_by_count_and_by_name() -> None:
    data = pa.table({"a": [1], "b": [2], "c": [3]})
    assert _stats(data, num_indexed_cols=2)["nullCount"] == {"a": 0, "b": 0}
    assert _stats(data, num_indexed_cols=0) == {"numRecords": 1, "nullCount": {}}
    cfg = StatsConfig.from_configuration({"delta.dataSkippingStatsColumns": "c, `a`"})
    assert _stats(data, config=cfg)["minValues"] == {"a": 1, "c": 3}
    cfg = StatsConfig.from_configuration({"delta.dataSkippingNumIndexedCols": "-1"})
    assert cfg.num_indexed_cols == -1


@pytest.mark.parametrize("bad", ["x", "-2"])
def test_bad_num_indexed_cols_is_rejected(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="dataSkippingNumIndexedCols"):
        StatsConfig.from_configuration({"delta.dataSkippingNumIndexedCols": bad})


def test_parquet_footer_stats_match_arrow_stats() -> None:
    typ = pa.struct([("x", pa.int32())])
    data = pa.table(
        {
            "a": [5, None, 1, 9],
            "s": ["k", "c", None, "x" * 40],
            "st": pa.array([{"x": 1}, None, {"x": 7}, {"x": None}], typ),
            "ts": pa.array([dt.datetime(2024, 5, 1, 0, 0, 0, 1)] * 4, pa.timestamp("us", "UTC")),
        }
    )
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=2)
    buf.seek(0)
    from_footer = json.loads(stats_from_parquet(pq.ParquetFile(buf).metadata))
    assert from_footer == json.loads(stats_for_table(data))


def test_parquet_footer_excludes_columns_and_drops_incomplete_bounds() -> None:
    data = pa.table({"p": [1, 1], "f": [float("nan"), 2.0]})
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=1)
    buf.seek(0)
    stats = json.loads(stats_from_parquet(pq.ParquetFile(buf).metadata, exclude=["p"]))
    assert stats["numRecords"] == 2
    assert "p" not in stats["nullCount"]
    assert "f" not in stats.get("minValues", {})


def _reference_adds() -> list[tuple[str, dict[str, object]]]:
    """(data file, add) of reference tables whose data files are present, stats included."""
    from urllib.parse import unquote

    from tests.conftest import TESTDATA, reference_tables

    out = []
    for name in reference_tables():
        root = TESTDATA / name
        if _has_variant_columns(root):
            # Delta logs a variant column's stats as one leaf (z85-encoded bounds); footer stats
            # see its shredded parts. We never write variant files: OPTIMIZE refuses such tables
            # with the feature named (test_features.test_unwritable_protocols_name_the_feature).
            continue
        for commit in sorted((root / "_delta_log").glob("*.json")):
            for line in commit.read_text().splitlines():
                add = json.loads(line).get("add") if line.strip() else None
                if add and add.get("stats") and (root / unquote(add["path"])).exists():
                    out.append((str(root / unquote(add["path"])), add))
    return out


def _has_variant_columns(root: Path) -> bool:
    first = root / "_delta_log" / f"{0:020d}.json"
    return first.exists() and '"variantType' in first.read_text()


def _within(ours: object, theirs: object, op: str) -> bool:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return all(k in theirs and _within(v, theirs[k], op) for k, v in ours.items())
    return bool(ours >= theirs if op == "min" else ours <= theirs)  # type: ignore[operator]


def test_footer_stats_agree_with_what_spark_and_delta_rs_logged() -> None:
    adds = _reference_adds()
    assert len(adds) >= 10  # Databricks/Photon, Spark and delta-rs files
    for path, add in adds:
        partition = list(add["partitionValues"])  # type: ignore[call-overload]
        ours = json.loads(stats_from_parquet(pq.ParquetFile(path).metadata, -1, exclude=partition))
        theirs = json.loads(str(add["stats"]))
        assert ours["numRecords"] == theirs["numRecords"], path
        assert ours.get("nullCount", {}) == theirs.get("nullCount", ours.get("nullCount")), path
        # our bounds come from the exact footer values: never looser than the logged ones
        assert _within(ours.get("minValues", {}), theirs.get("minValues", {}), "min"), path
        assert _within(ours.get("maxValues", {}), theirs.get("maxValues", {}), "max"), path
