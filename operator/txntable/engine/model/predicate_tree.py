"""The predicate tree: nodes, their SQL text, and column-wise evaluation with Arrow kernels.

Kept apart from parsing and binding (``predicates``) so each stays small. Evaluation follows SQL's
three-valued logic: comparisons with null are unknown (null), ``AND``/``OR`` are Kleene, and
literals are converted to the column's type exactly like partition values are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidActionError, InvalidArgumentError
from txntable.engine.model.schema import parse_partition_column

Literal = str | int | float | bool | None

KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE"})
_CMP = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


# -- AST ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Predicate:
    """Base of the predicate tree. ``types`` maps bound column names to Delta types."""

    def columns(self) -> frozenset[str]:
        return frozenset()

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        """Boolean array (nulls = unknown) over rows of typed partition values."""
        raise NotImplementedError

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return self

    def sql(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Const(Predicate):
    value: bool

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        return pa.array([self.value] * values.num_rows, pa.bool_())

    def sql(self) -> str:
        return "TRUE" if self.value else "FALSE"


TRUE = Const(True)


@dataclass(frozen=True)
class Compare(Predicate):
    column: str
    op: str
    literal: Literal

    def columns(self) -> frozenset[str]:
        return frozenset({self.column})

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        column = values.column(self.column)
        if self.literal is None:  # comparing with NULL is always unknown
            return pa.nulls(values.num_rows, pa.bool_())
        scalar = _typed_literal(self.literal, column.type, types.get(self.column, "string"))
        return _combine(_CMP[self.op](column, scalar))

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return Compare(names[self.column], self.op, self.literal)

    def sql(self) -> str:
        return f"{_quote_name(self.column)} {self.op} {sql_literal(self.literal)}"


@dataclass(frozen=True)
class InList(Predicate):
    column: str
    literals: tuple[Literal, ...]
    negated: bool = False

    def columns(self) -> frozenset[str]:
        return frozenset({self.column})

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        column = _combine(values.column(self.column))
        delta_type = types.get(self.column, "string")
        present = [v for v in self.literals if v is not None]
        value_set = pa.array(
            [_typed_literal(v, column.type, delta_type).as_py() for v in present], column.type
        )
        hit = pc.is_in(column, value_set=value_set)
        # SQL: NULL IN (...) is unknown; x IN (..., NULL) is true or unknown, never false.
        unknown = pa.scalar(None, pa.bool_())
        result = pc.if_else(pc.is_null(column), unknown, hit)
        if len(present) != len(self.literals):
            result = pc.if_else(result, True, unknown)
        return pc.invert(result) if self.negated else result

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return InList(names[self.column], self.literals, self.negated)

    def sql(self) -> str:
        items = ", ".join(sql_literal(v) for v in self.literals)
        return f"{_quote_name(self.column)} {'NOT IN' if self.negated else 'IN'} ({items})"


@dataclass(frozen=True)
class IsNull(Predicate):
    column: str
    negated: bool = False

    def columns(self) -> frozenset[str]:
        return frozenset({self.column})

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        column = values.column(self.column)
        return _combine(pc.is_valid(column) if self.negated else pc.is_null(column))

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return IsNull(names[self.column], self.negated)

    def sql(self) -> str:
        return f"{_quote_name(self.column)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True)
class Not(Predicate):
    child: Predicate

    def columns(self) -> frozenset[str]:
        return self.child.columns()

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        return pc.invert(self.child.evaluate(values, types))

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return Not(self.child.rename(names))

    def sql(self) -> str:
        return f"NOT ({self.child.sql()})"


@dataclass(frozen=True)
class And(Predicate):
    left: Predicate
    right: Predicate

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        return pc.and_kleene(self.left.evaluate(values, types), self.right.evaluate(values, types))

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return And(self.left.rename(names), self.right.rename(names))

    def sql(self) -> str:
        return f"({self.left.sql()}) AND ({self.right.sql()})"


@dataclass(frozen=True)
class Or(Predicate):
    left: Predicate
    right: Predicate

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def evaluate(self, values: pa.Table, types: Mapping[str, Any]) -> pa.Array:
        return pc.or_kleene(self.left.evaluate(values, types), self.right.evaluate(values, types))

    def rename(self, names: Mapping[str, str]) -> Predicate:
        return Or(self.left.rename(names), self.right.rename(names))

    def sql(self) -> str:
        return f"({self.left.sql()}) OR ({self.right.sql()})"


def _combine(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks()
    return array


def _typed_literal(value: Literal, arrow_type: pa.DataType, delta_type: Any) -> pa.Scalar:
    """The literal as a scalar of the column's type, parsed like a partition value."""
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pa.scalar(text, arrow_type)
    numeric_column = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
    if numeric_column and isinstance(value, int | float) and not isinstance(value, bool):
        return pa.scalar(value)  # let Arrow promote (id = 1.5 is simply false)
    try:
        parsed = parse_partition_column(pa.array([text], pa.string()), delta_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, InvalidActionError) as exc:
        raise InvalidArgumentError(
            f"literal {sql_literal(value)} is not a valid {delta_type} value: {exc}"
        ) from exc
    scalar: pa.Scalar = parsed[0]
    if not scalar.is_valid:
        raise InvalidArgumentError(f"literal {sql_literal(value)} is not a valid {delta_type}")
    return scalar


def _quote_name(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name.upper() not in KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: Literal) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("'", "''") + "'"
