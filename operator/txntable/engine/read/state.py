"""Reconciled table state and log replay, with the file list kept as Arrow columns.

A table with a hundred thousand live files must load in a fraction of a second, so the file list
never becomes a hundred thousand Python objects: a checkpoint's ``add`` rows stay an Arrow table,
and the (few) commits after it are folded in with one vectorised filter plus one append. The
reconciliation rules are the protocol's (PROTOCOL.md "Action Reconciliation"): the key of a logical
file is its raw path plus its deletion-vector id; an ``add`` makes a key live and clears its
tombstone, a ``remove`` does the opposite; protocol and metadata are last-wins; ``txn`` is latest
per app id; ``domainMetadata`` is latest per domain with ``removed`` deleting it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.model.actions import (
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)

_STR_MAP = pa.map_(pa.string(), pa.string())
DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)

#: Columns of ``Snapshot.files()``: the ``add`` action's fields, as the protocol names them.
ADD_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("partitionValues", _STR_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", _STR_MAP),
        ("deletionVector", DV_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
    ]
)

#: Columns of ``Snapshot.tombstones()``: the ``remove`` action's fields.
REMOVE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", _STR_MAP),
        ("size", pa.int64()),
        ("stats", pa.string()),
        ("tags", _STR_MAP),
        ("deletionVector", DV_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)

FileKey = tuple[str, str | None]


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def from_struct_column(column: pa.ChunkedArray | pa.Array, schema: pa.Schema) -> pa.Table:
    """Rows of a checkpoint's action struct column (nulls dropped), conformed to ``schema``."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    column = _valid_rows(column)
    present = {column.type.field(i).name: i for i in range(column.type.num_fields)}
    arrays = []
    for f in schema:
        if f.name in present:
            child = pc.struct_field(column, [present[f.name]])
            arrays.append(_conform(child, f.type))
        elif f.name == "stats" and "stats_parsed" in present:
            arrays.append(_stats_from_struct(pc.struct_field(column, [present["stats_parsed"]])))
        else:
            arrays.append(pa.nulls(len(column), f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _valid_rows(column: pa.Array) -> pa.Array:
    """The non-null rows of ``column``: a slice, not a copy, when they are one run (as in
    checkpoints that write each action type together, delta-rs's)."""
    if column.null_count == 0:
        return column
    valid = pc.is_valid(column)
    count = len(column) - column.null_count
    if count == 0:
        return column.slice(0, 0)
    first = pc.index(valid, True).as_py()
    if not pc.any(pc.invert(valid.slice(first, count))).as_py():
        return column.slice(first, count)
    return column.filter(valid)


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    if array.type == target:
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        names = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = [
            _conform(pc.struct_field(array, [names[t.name]]), t.type)
            if t.name in names
            else pa.nulls(len(array), t.type)
            for t in target
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=pc.invert(pc.is_valid(array))
        )
    return array.cast(target)


def _stats_from_struct(parsed: pa.Array) -> pa.Array:
    """Rebuild JSON stats from ``stats_parsed`` (only for checkpoints written without ``stats``),
    in Delta's JSON forms: ISO timestamps with milliseconds, dates, numbers, no NaN."""
    import json

    out: list[str | None] = []
    for row in _timestamps_to_ms(parsed).to_pylist():
        if row is None:
            out.append(None)
            continue
        out.append(json.dumps(_jsonable(row, parsed.type), separators=(",", ":")))
    return pa.array(out, pa.string())


def _timestamps_to_ms(array: pa.Array) -> pa.Array:
    kind = array.type
    if pa.types.is_timestamp(kind):
        return array.cast(pa.timestamp("ms", kind.tz), safe=False)
    if pa.types.is_struct(kind) and kind.num_fields:
        children = [_timestamps_to_ms(pc.struct_field(array, [i])) for i in range(kind.num_fields)]
        fields = [pa.field(f.name, c.type, f.nullable) for f, c in zip(kind, children, strict=True)]
        return pa.StructArray.from_arrays(
            children, fields=fields, mask=pc.invert(pc.is_valid(array))
        )
    return array


def _jsonable(value: Any, kind: pa.DataType) -> Any:
    """A stats value as JSON (``None`` to leave it out); ``kind`` is the original Arrow type."""
    import datetime as dt
    import math
    from decimal import Decimal

    if value is None:
        return None
    if pa.types.is_struct(kind):
        members = ((f.name, _jsonable(value.get(f.name), f.type)) for f in kind)
        return {name: v for name, v in members if v is not None}
    if isinstance(value, dt.datetime):
        # instants (a time zone, or Spark's INT96 nanoseconds) end in Z; timestamp_ntz does not
        instant = kind.tz is not None or kind.unit == "ns"
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + "Z" if instant else text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes | dt.time):
        return None
    return value


def actions_to_table(actions: Iterable[AddFile | RemoveFile], schema: pa.Schema) -> pa.Table:
    """File actions as rows of ``schema``, exactly what their ``to_json`` objects give, but built
    column by column (a JSON object per action dominated replay time)."""
    items = list(actions)
    if not items:
        return empty(schema)
    kind = type(items[0])
    if any(type(a) is not kind for a in items):
        rows = [a.to_json() for a in items]
        return pa.Table.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
    attrs = {key: attr for attr, key in kind._json_names()}
    # to_json falls back to ``extra`` for a member whose attribute is None; explicit nulls (the
    # usual content of ``extra``) change nothing, so only other values need a second look
    overrides = [
        (i, kept)
        for i, a in enumerate(items)
        if a.extra and (kept := {k: v for k, v in a.extra.items() if v is not None})
    ]
    arrays = []
    for f in schema:
        attr = attrs.get(f.name)
        values: list[Any] = [getattr(a, attr) for a in items] if attr else [None] * len(items)
        if f.name in kind.NESTED:
            to_json = kind.NESTED[f.name][1]
            values = [None if v is None else to_json(v) for v in values]
        for i, kept in overrides:
            if values[i] is None and f.name in kept:
                values[i] = kept[f.name]
        arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def key_column(table: pa.Table) -> pa.Array:
    """Reconciliation key per row: the raw path, plus ``\\x00`` and the DV id when there is one."""
    paths = table.column("path")
    dv = table.column("deletionVector")
    if dv.null_count == len(dv):
        return paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    offset_part = pc.if_else(pc.is_null(offset), "", pc.binary_join_element_wise("@", offset, ""))
    dv_id = pc.binary_join_element_wise(
        pc.struct_field(dv, "storageType"), pc.struct_field(dv, "pathOrInlineDv"), offset_part, ""
    )
    joined = pc.binary_join_element_wise(paths, dv_id, "\x00")
    return pc.coalesce(joined, paths)


def encode_key(key: FileKey) -> str:
    path, dv_id = key
    return path if dv_id is None else f"{path}\x00{dv_id}"


@dataclass(frozen=True)
class TableState:
    """Everything a snapshot knows, reconciled at ``version``."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table
    tombstones: pa.Table
    txns: dict[str, SetTransaction] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)


class ActionFold:
    """The reconciliation rules of the module docstring over the actions of consecutive commits,
    the one place they are written: ``adds`` and ``removes`` hold the last file action per key
    (a key is in at most one of them), the rest is last-wins as the protocol says. What the
    folded actions make of a base state is the caller's: ``fold`` builds the next
    ``TableState``, ``summary.TableSummary.advance`` the next summary."""

    __slots__ = ("adds", "domains", "metadata", "metadata_changes", "protocol", "removes", "txns")

    def __init__(
        self,
        protocol: Protocol | None,
        metadata: Metadata | None,
        txns: dict[str, SetTransaction] | None = None,
        domains: dict[str, DomainMetadata] | None = None,
    ) -> None:
        self.protocol = protocol
        self.metadata = metadata
        #: every ``metaData`` action folded, in log order (the last one is ``metadata``)
        self.metadata_changes: list[Metadata] = []
        self.txns = dict(txns) if txns else {}
        self.domains = dict(domains) if domains else {}
        self.adds: dict[str, AddFile] = {}
        self.removes: dict[str, RemoveFile] = {}

    def apply(self, actions: Iterable[Action]) -> None:
        for action in actions:
            if isinstance(action, AddFile):
                key = encode_key(action.key)
                self.adds[key] = action
                self.removes.pop(key, None)
            elif isinstance(action, RemoveFile):
                key = encode_key(action.key)
                self.adds.pop(key, None)
                self.removes[key] = action
            elif isinstance(action, Metadata):
                self.metadata = action
                self.metadata_changes.append(action)
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, SetTransaction):
                self.txns[action.app_id] = action
            elif isinstance(action, DomainMetadata):
                if action.removed:
                    self.domains.pop(action.domain, None)
                else:
                    self.domains[action.domain] = action

    def touched(self) -> set[str]:
        """The keys (``encode_key``) whose file actions replace what the base state had."""
        return self.adds.keys() | self.removes.keys()


#: How many leading rows of a state's ``files`` and ``tombstones`` are of some kind (the
#: snapshot's rows whose statistics are not read yet): a fold keeps the base's rows in order
#: and appends the new ones, so such rows stay a prefix.
Prefix = tuple[int, int]


def _next_state(
    base: TableState | None, folded: ActionFold, version: int, prefix: Prefix
) -> tuple[TableState | None, Prefix]:
    """``base`` with the folded commits applied (``None`` without protocol or metadata), and
    what is left of ``prefix`` in it."""
    if folded.protocol is None or folded.metadata is None:
        return None, (0, 0)
    touched = folded.touched()
    base_files = base.files if base else empty(ADD_SCHEMA)
    base_tombs = base.tombstones if base else empty(REMOVE_SCHEMA)
    files_prefix, tombs_prefix = prefix
    if touched:
        value_set = pa.array(list(touched), pa.string())
        base_files, files_prefix = _drop_keys(base_files, value_set, files_prefix)
        base_tombs, tombs_prefix = _drop_keys(base_tombs, value_set, tombs_prefix)
    files = _concat(base_files, actions_to_table(folded.adds.values(), ADD_SCHEMA))
    tombs = _concat(base_tombs, actions_to_table(folded.removes.values(), REMOVE_SCHEMA))
    state = TableState(
        version, folded.protocol, folded.metadata, files, tombs, folded.txns, folded.domains
    )
    return state, (files_prefix, tombs_prefix)


def _drop_keys(table: pa.Table, keys: pa.Array, prefix: int) -> tuple[pa.Table, int]:
    """``table`` without the rows whose key is in ``keys``, and how many of its first
    ``prefix`` rows are left; no copy when none is (the common case of appends on top of a big
    checkpoint, where a filter would copy every column)."""
    if not table.num_rows:
        return table, prefix
    hit = pc.is_in(key_column(table), keys)
    if not pc.any(hit).as_py():
        return table, prefix
    if prefix:
        prefix -= int(pc.sum(hit.slice(0, prefix)).as_py() or 0)
    return table.filter(pc.invert(hit)), prefix


def _concat(a: pa.Table, b: pa.Table) -> pa.Table:
    if b.num_rows == 0:
        return a
    if a.num_rows == 0:
        return b
    return pa.concat_tables([a, b])


def fold(
    base: TableState | None, commits: Iterable[tuple[int, list[Action]]], version: int
) -> TableState | None:
    """Apply commits (ascending) on top of ``base``; ``None`` if protocol/metadata never appear."""
    return fold_keeping(base, commits, version, (0, 0))[0]


def fold_keeping(
    base: TableState | None,
    commits: Iterable[tuple[int, list[Action]]],
    version: int,
    prefix: Prefix,
) -> tuple[TableState | None, Prefix]:
    """``fold``, and how many of the ``prefix`` rows of ``base`` the new state still has (they
    are again its leading rows)."""
    if base is None:
        folded = ActionFold(None, None)
    else:
        folded = ActionFold(base.protocol, base.metadata, base.txns, base.domains)
    for _, actions in commits:
        folded.apply(actions)
    return _next_state(base, folded, version, prefix)


def with_version(state: TableState, version: int) -> TableState:
    return replace(state, version=version)
