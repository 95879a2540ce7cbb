"""Partition predicates: parse a small SQL subset, bind it to a table, evaluate it column-wise.

A transaction records the predicates it scanned with, and the conflict checker later asks "would a
file that a concurrent commit added have matched what I read?" (the added-files check of
``commit.conflicts``). Both questions need the same evaluation, so there is one: predicates are
evaluated with Arrow kernels on *typed* partition values (``Snapshot.partition_values()``), with
SQL's three-valued logic (a null result does not match). Only partition columns can be evaluated
on file metadata; conjuncts over other columns of the schema are kept apart as data conjuncts,
which neither prune files nor take part in conflict detection (Delta does the same). The tree and
its evaluation live in ``predicate_tree``; this module parses and binds.

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
from txntable.engine.model.predicate_tree import (
    KEYWORDS,
    TRUE,
    And,
    Compare,
    Const,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    Predicate,
)
from txntable.engine.model.schema import Field, parse_partition_column

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
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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
            if kind == "word" and value.upper() in KEYWORDS:
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


__all__ = [
    "TRUE",
    "And",
    "BoundPredicate",
    "Compare",
    "Const",
    "InList",
    "IsNull",
    "Not",
    "Or",
    "Predicate",
    "bind",
    "conjuncts",
    "parse_predicate",
    "typed_partition_values",
]
