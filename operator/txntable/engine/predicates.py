"""Partition predicates: parse a small SQL subset, bind it to a table, evaluate it column-wise.

A transaction records the predicates it scanned with, and the conflict checker later asks "would a
file that a concurrent commit added have matched what I read?" (brief 5.3, 5.8 step 6). Both
questions need the same evaluation, so there is one: predicates are evaluated with Arrow kernels on
*typed* partition values (``Snapshot.partition_values()``), with SQL's three-valued logic (a null
result does not match). Only partition columns can be evaluated on file metadata; conjuncts over
other columns of the schema are kept apart as data conjuncts, which neither prune files nor take
part in conflict detection (Delta does the same).

Grammar (keywords case-insensitive)::

    expr    := or ; or := and (OR and)* ; and := not (AND not)* ; not := NOT not | primary
    primary := '(' expr ')' | TRUE | FALSE
             | operand (cmp operand | [NOT] IN '(' literal, ... ')' | IS [NOT] NULL)
    cmp     := = | == | != | <> | < | <= | > | >=
    operand := column | literal ; column := name | `quoted name`
    literal := 'string' | "string" | number | TRUE | FALSE | NULL | DATE 'x' | TIMESTAMP 'x'
    (``date`` and ``timestamp`` stay usable as column names: only a following string makes them
    a typed literal)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.schema import Field, parse_partition_column

Literal = str | int | float | bool | None

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")
    | (?P<bq>`(?:[^`]|``)+`)
    | (?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
    | (?P<op><=|>=|<>|!=|==|=|<|>)
    | (?P<punct>[(),])
    | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE"})
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
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
        return f"{_quote_name(self.column)} {self.op} {_sql_literal(self.literal)}"


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
        items = ", ".join(_sql_literal(v) for v in self.literals)
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
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise InvalidArgumentError(
            f"literal {_sql_literal(value)} is not a valid {delta_type} value: {exc}"
        ) from exc
    scalar: pa.Scalar = parsed[0]
    if not scalar.is_valid:
        raise InvalidArgumentError(f"literal {_sql_literal(value)} is not a valid {delta_type}")
    return scalar


def _quote_name(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name.upper() not in _KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def _sql_literal(value: Literal) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("'", "''") + "'"


# -- parsing -----------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.pos = 0

    def _tokenize(self, text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.lastgroup is None:
                raise self._error(f"unexpected character {text[pos:].lstrip()[:1]!r}", pos)
            kind = m.lastgroup
            value = m.group(kind)
            if kind == "word" and value.upper() in _KEYWORDS:
                kind, value = "kw", value.upper()
            tokens.append((kind, value))
            pos = m.end()
        return tokens

    def _error(self, what: str, pos: int | None = None) -> InvalidArgumentError:
        where = f" at position {pos}" if pos is not None else ""
        return InvalidArgumentError(f"invalid predicate {self.text!r}: {what}{where}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self._error("unexpected end")
        self.pos += 1
        return token

    def accept(self, kind: str, value: str | None = None) -> bool:
        token = self.peek()
        if token and token[0] == kind and (value is None or token[1] == value):
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        if not self.accept(kind, value):
            token = self.peek()
            raise self._error(f"expected {value!r}, found {token[1] if token else 'end'!r}")

    def parse(self) -> Predicate:
        if not self.tokens:
            raise self._error("empty predicate")
        result = self.parse_or()
        if self.peek() is not None:
            raise self._error(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return result

    def parse_or(self) -> Predicate:
        left = self.parse_and()
        while self.accept("kw", "OR"):
            left = Or(left, self.parse_and())
        return left

    def parse_and(self) -> Predicate:
        left = self.parse_not()
        while self.accept("kw", "AND"):
            left = And(left, self.parse_not())
        return left

    def parse_not(self) -> Predicate:
        if self.accept("kw", "NOT"):
            return Not(self.parse_not())
        return self.parse_primary()

    def parse_primary(self) -> Predicate:
        if self.accept("punct", "("):
            inner = self.parse_or()
            self.expect("punct", ")")
            return inner
        left = self.parse_operand()
        token = self.peek()
        if token is None or token in (("kw", "AND"), ("kw", "OR"), ("punct", ")")):
            if isinstance(left, _Lit) and isinstance(left.value, bool):
                return Const(left.value)
            raise self._error("expected a comparison")
        if token[0] == "op":
            self.take()
            op = {"==": "=", "<>": "!="}.get(token[1], token[1])
            right = self.parse_operand()
            if isinstance(left, _Col) and isinstance(right, _Lit):
                return Compare(left.name, op, right.value)
            if isinstance(left, _Lit) and isinstance(right, _Col):
                return Compare(right.name, _FLIP[op], left.value)
            raise self._error("a comparison needs one column and one literal")
        if not isinstance(left, _Col):
            raise self._error("IN and IS need a column on the left")
        if self.accept("kw", "IS"):
            negated = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            return IsNull(left.name, negated)
        negated = self.accept("kw", "NOT")
        self.expect("kw", "IN")
        self.expect("punct", "(")
        values = [self.parse_literal()]
        while self.accept("punct", ","):
            values.append(self.parse_literal())
        self.expect("punct", ")")
        return InList(left.name, tuple(values), negated)

    def parse_literal(self) -> Literal:
        operand = self.parse_operand()
        if not isinstance(operand, _Lit):
            raise self._error("IN lists hold literals only")
        return operand.value

    def parse_operand(self) -> _Col | _Lit:
        kind, value = self.take()
        if kind == "str":
            return _Lit(value[1:-1].replace(value[0] * 2, value[0]))
        if kind == "num":
            number = float(value) if any(c in value for c in ".eE") else int(value)
            return _Lit(number)
        if kind == "bq":
            return _Col(value[1:-1].replace("``", "`"))
        if kind == "word":
            following = self.peek()
            if value.upper() in ("DATE", "TIMESTAMP") and following and following[0] == "str":
                self.pos += 1  # a typed literal such as DATE '2024-01-01'
                return _Lit(following[1][1:-1].replace(following[1][0] * 2, following[1][0]))
            return _Col(value)
        if kind == "kw" and value in ("TRUE", "FALSE"):
            return _Lit(value == "TRUE")
        if kind == "kw" and value == "NULL":
            return _Lit(None)
        raise self._error(f"unexpected {value!r}")


@dataclass(frozen=True)
class _Col:
    name: str


@dataclass(frozen=True)
class _Lit:
    value: Literal


def parse_predicate(text: str) -> Predicate:
    """Parse a predicate; bad syntax raises ``InvalidArgumentError`` naming the problem."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a predicate must be a string, got {type(text).__name__}")
    return _Parser(text).parse()


# -- binding to a table -------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundPredicate:
    """A predicate split for a table: the partition-only part (``TRUE`` when none) and the rest.

    ``partition`` is what scans prune with and what the conflict checker evaluates; ``types``
    gives the Delta type of each partition column it mentions (the read-time partition schema).
    """

    partition: Predicate
    data: tuple[Predicate, ...]
    types: Mapping[str, Any]

    def matches(self, partition_values: pa.Table) -> pa.Array:
        """Boolean mask (nulls as False) over rows of typed partition values."""
        if isinstance(self.partition, Const):
            return pa.array([self.partition.value] * partition_values.num_rows, pa.bool_())
        mask = self.partition.evaluate(partition_values, self.types)
        return pc.fill_null(mask, False)

    def sql(self) -> str:
        return self.partition.sql()


def conjuncts(predicate: Predicate) -> list[Predicate]:
    if isinstance(predicate, And):
        return conjuncts(predicate.left) + conjuncts(predicate.right)
    return [predicate]


def bind(
    predicate: str | Predicate | None, fields: Sequence[Field], partition_columns: Iterable[str]
) -> BoundPredicate:
    """Resolve column names (case-insensitively) and split partition from data conjuncts.

    A column that is not in the schema raises ``InvalidArgumentError``.
    """
    if predicate is None:
        return BoundPredicate(TRUE, (), {})
    parsed = parse_predicate(predicate) if isinstance(predicate, str) else predicate
    by_lower = {f.name.lower(): f for f in fields}
    partition = {c.lower() for c in partition_columns}
    names: dict[str, str] = {}
    for name in parsed.columns():
        found = by_lower.get(name.lower())
        if found is None:
            known = ", ".join(f.name for f in fields) or "none"
            raise InvalidArgumentError(
                f"predicate column {name!r} is not in the table schema (columns: {known})"
            )
        names[name] = found.name
    bound = parsed.rename(names)
    part: list[Predicate] = []
    data: list[Predicate] = []
    for conjunct in conjuncts(bound):
        cols = conjunct.columns()
        (part if all(c.lower() in partition for c in cols) else data).append(conjunct)
    part = [c for c in part if c != TRUE]
    combined: Predicate = TRUE
    for conjunct in part:
        combined = conjunct if combined == TRUE else And(combined, conjunct)
    types = {f.name: f.type for f in fields if f.name.lower() in partition}
    return BoundPredicate(combined, tuple(data), types)


def typed_partition_values(
    raw: Sequence[Mapping[str, str | None]], fields: Sequence[Field], partition_columns: list[str]
) -> pa.Table:
    """Typed partition values (one column per partition column) of raw ``partitionValues`` maps,
    as ``Snapshot.partition_values()`` builds them for live files."""
    by_name = {f.name: f for f in fields}
    arrays: list[pa.Array] = []
    for name in partition_columns:
        field = by_name.get(name)
        physical = field.physical_name if field else name
        strings = pa.array([row.get(physical) for row in raw], pa.string())
        arrays.append(parse_partition_column(strings, field.type if field else "string"))
    if not partition_columns:
        return pa.table({"_": pa.nulls(len(raw), pa.bool_())}).drop(["_"])
    return pa.Table.from_arrays(arrays, names=list(partition_columns))
