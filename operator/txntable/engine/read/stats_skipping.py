"""Data skipping for row-level deletes: leave out files whose statistics show no row can match.

A row-level DELETE (``row_deletes``) reads every candidate file, so a file whose ``minValues`` /
``maxValues`` / ``nullCount`` prove that the predicate is true for none of its rows is neither
read nor recorded as read (as Spark does: a concurrent commit replacing such a file does not
conflict; one adding files to the predicate's partitions still does). Only what is certain is
used: integer and double columns compared with numbers (a float column's bounds are written as
decimal text that may not round-trip), string columns' minima compared with strings (a minimum
cut to a prefix is still a lower bound; a cut maximum is an upper bound only if its writer
appended a tie-breaker, which not every writer does), null counts; everything else may match.
Bounds hold for a file's live rows whether tight or wide (deletion vectors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from txntable.engine.model.predicate_tree import And, Compare, Const, InList, IsNull, Or, Predicate

_NUMERIC = frozenset({"long", "integer", "short", "byte", "double"})


def prune(files: pa.Table, predicate: Predicate, types: Mapping[str, Any]) -> pa.Table:
    """The rows of ``files`` (``ADD_SCHEMA``) whose statistics leave a match possible."""
    if files.num_rows == 0:
        return files
    keep = [
        _may_match(predicate, _parse(stats), types) for stats in files.column("stats").to_pylist()
    ]
    return files.filter(pa.array(keep, pa.bool_()))


def _parse(stats: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(stats) if stats else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _may_match(predicate: Predicate, stats: Mapping[str, Any], types: Mapping[str, Any]) -> bool:
    if isinstance(predicate, Const):
        return predicate.value
    if isinstance(predicate, And):
        return _may_match(predicate.left, stats, types) and _may_match(
            predicate.right, stats, types
        )
    if isinstance(predicate, Or):
        return _may_match(predicate.left, stats, types) or _may_match(predicate.right, stats, types)
    if isinstance(predicate, Compare):
        return _compare_may_match(predicate.column, predicate.op, predicate.literal, stats, types)
    if isinstance(predicate, InList) and not predicate.negated:
        return any(
            _compare_may_match(predicate.column, "=", value, stats, types)
            for value in predicate.literals
        )
    if isinstance(predicate, IsNull):
        return _null_may_match(predicate, stats)
    return True  # NOT, NOT IN: bounds do not tell


def _bound(stats: Mapping[str, Any], kind: str, column: str) -> Any:
    values = stats.get(kind)
    return values.get(column) if isinstance(values, dict) else None


def _comparable(value: Any, literal: Any, delta_type: Any) -> bool:
    if isinstance(delta_type, str) and delta_type in _NUMERIC:
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, literal))
    if delta_type == "string":
        return isinstance(value, str) and isinstance(literal, str)
    return False


def _compare_may_match(
    column: str, op: str, literal: Any, stats: Mapping[str, Any], types: Mapping[str, Any]
) -> bool:
    if literal is None:
        return False  # a comparison with NULL is never true
    delta_type = types.get(column)
    low, high = _bound(stats, "minValues", column), _bound(stats, "maxValues", column)
    low_ok = low is not None and _comparable(low, literal, delta_type)
    high_ok = delta_type != "string" and high is not None and _comparable(high, literal, delta_type)
    if op == "=":
        return (not low_ok or low <= literal) and (not high_ok or literal <= high)
    if op == "<":
        return not low_ok or low < literal
    if op == "<=":
        return not low_ok or low <= literal
    if op == ">":
        return not high_ok or high > literal
    if op == ">=":
        return not high_ok or high >= literal
    return True  # != (NaN and string prefixes make equal bounds inconclusive)


def _null_may_match(predicate: IsNull, stats: Mapping[str, Any]) -> bool:
    nulls = _bound(stats, "nullCount", predicate.column)
    if not isinstance(nulls, int) or isinstance(nulls, bool):
        return True
    if not predicate.negated:
        return nulls > 0
    records = stats.get("numRecords")
    if not isinstance(records, int) or isinstance(records, bool):
        return True
    return nulls < records


__all__ = ["prune"]
