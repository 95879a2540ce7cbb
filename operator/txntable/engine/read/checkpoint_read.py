"""Reading every kind of checkpoint into a ``TableState``.

Classic and multi-part checkpoints are Parquet with one struct column per action type; V2
checkpoints have a top-level file (JSON lines or Parquet) holding the non-file actions and either
the file actions or ``sidecar`` rows pointing at Parquet files in ``_delta_log/_sidecars``. A
classic-named file may be V2 inside, so the kind is decided by content. File actions are read
column-wise and stay Arrow; only the handful of non-file actions become Python objects.

Most of a checkpoint's bytes are its files' ``stats`` JSON strings. A reader that does not need
them yet reads the checkpoint without them and, when asked, reads only them and the
reconciliation key (``read_checkpoint_stats``): a nested projection, so the skipped members are
never decoded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txntable.engine.errors import CorruptLogError, InvalidActionError
from txntable.engine.model.actions import (
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    Sidecar,
    parse_commit,
)
from txntable.engine.read.segment import CheckpointRef
from txntable.engine.read.state import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    TableState,
    actions_to_table,
    empty,
    from_struct_column,
)
from txntable.engine.storage.base import Storage
from txntable.engine.storage.paths import LOG_DIR, SIDECAR_DIR, LogFileKind, decode_path

_NON_FILE: dict[str, Any] = {
    "protocol": Protocol,
    "metaData": Metadata,
    "txn": SetTransaction,
    "domainMetadata": DomainMetadata,
    "sidecar": Sidecar,
}


#: Members of ``add``/``remove`` a reader without statistics leaves in the file.
_STATS_MEMBERS = frozenset({"stats", "stats_parsed", "tags", "partitionValues_parsed"})
#: Members read to fill in those statistics later: the reconciliation key and the statistics.
_LATE_MEMBERS = frozenset({"path", "deletionVector", "stats", "stats_parsed", "tags"})
#: The columns of ``read_checkpoint_stats``'s tables.
STATS_SCHEMA = pa.schema([ADD_SCHEMA.field(n) for n in ("path", "deletionVector", "stats", "tags")])


class Members(Enum):
    """Which members of the file actions a read decodes."""

    ALL = "all"
    WITHOUT_STATS = "all but the statistics"
    STATS = "the key and the statistics"

    def keeps(self, member: str) -> bool:
        if self is Members.WITHOUT_STATS:
            return member not in _STATS_MEMBERS
        return self is Members.ALL or member in _LATE_MEMBERS


def _read_parquet(
    storage: Storage, relative: str, want: set[str], members: Members = Members.ALL
) -> pa.Table:
    source = storage.open_input(relative)
    try:
        pf = pq.ParquetFile(source, pre_buffer=True)  # coalesced reads: ~1.5x faster
        return pf.read(columns=_columns(pf.schema_arrow, want, members))
    except (OSError, pa.ArrowInvalid) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise CorruptLogError(f"checkpoint {relative} is not readable Parquet: {exc}") from exc
    finally:
        if not isinstance(source, str):
            source.close()


def _columns(schema: pa.Schema, want: set[str], members: Members) -> list[str]:
    """The columns to read: ``want``'s top-level columns, of the file actions only the
    ``members`` (a nested projection: the skipped ones are never decoded)."""
    out: list[str] = []
    for name in schema.names:
        if name not in want:
            continue
        kind = schema.field(name).type
        if members is not Members.ALL and name in ("add", "remove") and pa.types.is_struct(kind):
            names = (kind.field(i).name for i in range(kind.num_fields))
            out += [f"{name}.{m}" for m in names if members.keeps(m)]
        else:
            out.append(name)
    return out


def _non_file_rows(table: pa.Table) -> list[Action]:
    out: list[Action] = []
    for name, cls in _NON_FILE.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if column.null_count == len(column):
            continue
        for row in column.filter(pc.is_valid(column)).to_pylist():
            obj = _to_json(row, column.type)
            if name == "metaData":
                obj.setdefault("format", {"provider": "parquet"}).setdefault("options", {})
            out.append(cls.from_json(obj))
    return out


def _to_json(value: Any, arrow_type: pa.DataType) -> Any:
    """An Arrow value as the action JSON it came from: maps (key/value pair lists in Python,
    empty ones included) become objects, null struct members are dropped."""
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: _to_json(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_struct(arrow_type):
        types = {
            arrow_type.field(i).name: arrow_type.field(i).type for i in range(arrow_type.num_fields)
        }
        return {k: _to_json(v, types[k]) for k, v in value.items() if v is not None}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_to_json(v, arrow_type.value_type) for v in value]
    return value


@dataclass(frozen=True)
class CheckpointPiece:
    """What one file of a checkpoint holds: its ``add`` and ``remove`` rows (conformed to
    ``ADD_SCHEMA``/``REMOVE_SCHEMA``) and its other actions (sidecar references included)."""

    adds: pa.Table
    removes: pa.Table
    others: list[Action]


def read_checkpoint_file(
    storage: Storage, relative: str, *, sidecar: bool = False, stats: bool = True
) -> CheckpointPiece:
    """One file of a checkpoint (``relative`` to the table root): a classic or multi-part
    Parquet part, a V2 top-level file (JSON lines or Parquet) or, with ``sidecar``, a sidecar
    (file actions only). The inline reader and the Spark tasks (``maintenance/replay_spark.py``)
    both read checkpoints through this."""
    if relative.endswith(".json"):
        actions = parse_commit(storage.read(relative), source=relative.rsplit("/", 1)[-1])
        return CheckpointPiece(
            actions_to_table((a for a in actions if isinstance(a, AddFile)), ADD_SCHEMA),
            actions_to_table((a for a in actions if isinstance(a, RemoveFile)), REMOVE_SCHEMA),
            [a for a in actions if type(a) in _NON_FILE.values()],
        )
    want = {"add", "remove"} if sidecar else {"add", "remove", *_NON_FILE, "checkpointMetadata"}
    table = _read_parquet(storage, relative, want, Members.ALL if stats else Members.WITHOUT_STATS)
    return CheckpointPiece(
        _file_actions(table, "add", ADD_SCHEMA),
        _file_actions(table, "remove", REMOVE_SCHEMA),
        [] if sidecar else _non_file_rows(table),
    )


def _file_actions(table: pa.Table, column: str, schema: pa.Schema) -> pa.Table:
    if column not in table.column_names:
        return empty(schema)
    return from_struct_column(table.column(column), schema)


def read_checkpoint(storage: Storage, ref: CheckpointRef, *, stats: bool = True) -> TableState:
    """The reconciled state stored in a complete checkpoint; with ``stats=False`` the file
    actions' ``stats`` and ``tags`` of Parquet checkpoints are not read (they are null)."""
    pieces = [
        read_checkpoint_file(storage, f"{LOG_DIR}/{info.name}", stats=stats) for info in ref.files
    ]
    others = [a for piece in pieces for a in piece.others]
    for sidecar in [a for a in others if isinstance(a, Sidecar)]:
        pieces.append(
            read_checkpoint_file(storage, sidecar_path(sidecar.path), sidecar=True, stats=stats)
        )
    return _assemble(ref.version, others, [p.adds for p in pieces], [p.removes for p in pieces])


def read_checkpoint_stats(storage: Storage, ref: CheckpointRef) -> tuple[pa.Table, pa.Table]:
    """The statistics and tags of a complete checkpoint's ``add`` and ``remove`` rows, with the
    columns of their reconciliation key (``STATS_SCHEMA``): what ``read_checkpoint`` with
    ``stats=False`` left out. JSON files of a V2 checkpoint are parsed whole."""
    adds: list[pa.Table] = []
    removes: list[pa.Table] = []
    parts = [f"{LOG_DIR}/{info.name}" for info in ref.files]
    parts += checkpoint_sidecars(storage, ref)
    for relative in parts:
        if relative.endswith(".json"):
            piece = read_checkpoint_file(storage, relative)
            adds.append(piece.adds.select(STATS_SCHEMA.names))
            removes.append(piece.removes.select(STATS_SCHEMA.names))
            continue
        table = _read_parquet(storage, relative, {"add", "remove"}, Members.STATS)
        adds.append(_file_actions(table, "add", STATS_SCHEMA))
        removes.append(_file_actions(table, "remove", STATS_SCHEMA))
    return pa.concat_tables(adds), pa.concat_tables(removes)


def checkpoint_sidecars(storage: Storage, ref: CheckpointRef) -> list[str]:
    """The sidecar files (relative to the table root) a checkpoint's files reference, read
    without its file actions: only the ``sidecar`` column of Parquet files is decoded."""
    found: list[Sidecar] = []
    for info in ref.files:
        relative = f"{LOG_DIR}/{info.name}"
        if info.name.endswith(".json"):
            found += [
                a
                for a in parse_commit(storage.read(relative), source=info.name)
                if isinstance(a, Sidecar)
            ]
        else:
            table = _read_parquet(storage, relative, {"sidecar"})
            found += [a for a in _non_file_rows(table) if isinstance(a, Sidecar)]
    return [sidecar_path(a.path) for a in found]


def sidecar_path(path: str) -> str:
    """Where a ``sidecar`` action's file is, relative to the table root."""
    decoded = decode_path(path)
    if "/" in decoded:
        marker = f"{LOG_DIR}/{SIDECAR_DIR}/"
        if marker in decoded:
            return marker + decoded.split(marker, 1)[1]
        raise InvalidActionError(f"sidecar path outside {LOG_DIR}/{SIDECAR_DIR}: {path!r}")
    return f"{LOG_DIR}/{SIDECAR_DIR}/{decoded}"


def _assemble(
    version: int, others: list[Action], adds: list[pa.Table], removes: list[pa.Table]
) -> TableState:
    protocol = next((a for a in reversed(others) if isinstance(a, Protocol)), None)
    metadata = next((a for a in reversed(others) if isinstance(a, Metadata)), None)
    if protocol is None or metadata is None:
        raise CorruptLogError(f"checkpoint at version {version} lacks protocol or metadata")
    txns = {a.app_id: a for a in others if isinstance(a, SetTransaction)}
    domains = {a.domain: a for a in others if isinstance(a, DomainMetadata) and not a.removed}
    files = pa.concat_tables(adds) if adds else empty(ADD_SCHEMA)
    tombstones = pa.concat_tables(removes) if removes else empty(REMOVE_SCHEMA)
    return TableState(version, protocol, metadata, files, tombstones, txns, domains)


def describe(ref: CheckpointRef) -> str:
    return json.dumps(
        {"version": ref.version, "kind": ref.kind.value, "files": [f.name for f in ref.files]}
    )


def checkpoint_problem(storage: Storage, ref: CheckpointRef) -> str | None:
    """Why a checkpoint cannot serve as a starting point (``None``: it can).

    Cheaper than ``read_checkpoint`` (file actions are not read) yet enough for log cleanup to
    trust it before deleting what it replaces: every file (and sidecar) exists and parses, and the
    checkpoint holds exactly one protocol and one metadata action."""
    counts = {"protocol": 0, "metaData": 0}
    sidecars: list[Sidecar] = []
    try:
        for info in ref.files:
            relative = f"{LOG_DIR}/{info.name}"
            if ref.kind is LogFileKind.CHECKPOINT_UUID and info.name.endswith(".json"):
                actions = parse_commit(storage.read(relative), source=info.name)
                counts["protocol"] += sum(isinstance(a, Protocol) for a in actions)
                counts["metaData"] += sum(isinstance(a, Metadata) for a in actions)
                sidecars += [a for a in actions if isinstance(a, Sidecar)]
                continue
            table = _read_parquet(storage, relative, {*counts, "sidecar"})
            for name in counts:
                if name in table.column_names:
                    column = table.column(name)
                    counts[name] += len(column) - column.null_count
            sidecars += [a for a in _non_file_rows(table) if isinstance(a, Sidecar)]
        for sidecar in sidecars:
            _read_parquet(storage, sidecar_path(sidecar.path), set())
    except FileNotFoundError as exc:
        return f"a file of it is missing ({exc})"
    except (CorruptLogError, OSError) as exc:
        return str(exc)
    if counts != {"protocol": 1, "metaData": 1}:
        return f"it holds {counts['protocol']} protocol and {counts['metaData']} metaData actions"
    return None
