"""The conflict checker: may a pending transaction commit after one winning commit?

Pure: it looks at what the pending transaction read and wants to write and at the actions of
one commit that landed after its read version, and either returns or raises Delta's named
exception. The checks and their order are Delta Spark's ``ConflictChecker``
(``ConflictChecker.scala``): protocol, metadata, domain metadata, app transactions, added files that
should have been read, deleted files that were read, files deleted by both. The retry loop calls it
once per winner, in version order, so the first conflicting winner is the one reported.

Deliberate differences from Spark, all on the safe side: a winner's ``metaData`` always conflicts
(Spark absorbs a few feature-enablement changes); app-id conflicts cover the app ids the pending
transaction *writes* as well as those it read (delta-rs checks written ids, Spark read ones); on an
unpartitioned table a transaction that is not a blind append conflicts with any added file even if
it recorded no read predicate (Spark needs a recorded predicate; ours is the stricter rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.commit.isolation import IsolationLevel
from txntable.engine.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from txntable.engine.model.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    dumps,
)
from txntable.engine.model.features import check_writable, reader_features, writer_features
from txntable.engine.model.predicates import BoundPredicate, typed_partition_values
from txntable.engine.model.schema import parse_schema

_RETRY_HINT = "Please try the operation again."


@dataclass(frozen=True)
class PendingCommit:
    """What the conflict checker needs to know about the transaction trying to commit."""

    actions: Sequence[Action]  # prepared actions, without commitInfo
    isolation_level: IsolationLevel
    read_predicates: Sequence[BoundPredicate] = ()
    read_files: frozenset[str] = frozenset()
    read_whole_table: bool = False
    read_app_ids: frozenset[str] = frozenset()
    read_protocol: Protocol | None = None  # None for a table being created
    read_metadata: Metadata | None = None
    is_blind_append: bool = False
    table_name: str = "table"

    @cached_property
    def metadata_changed(self) -> bool:
        return any(isinstance(a, Metadata) for a in self.actions)

    @cached_property
    def partition_metadata(self) -> Metadata | None:
        """The metadata whose partition schema predicates are evaluated with (read time)."""
        if self.read_metadata is not None:
            return self.read_metadata
        return next((a for a in self.actions if isinstance(a, Metadata)), None)


@dataclass(frozen=True)
class WinningCommit:
    """One commit that landed after the pending transaction's read version."""

    version: int
    actions: Sequence[Action]
    file_mtime_ms: int = 0

    @cached_property
    def commit_info(self) -> CommitInfo | None:
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @property
    def operation(self) -> str:
        info = self.commit_info
        return (info.operation if info else None) or "TRANSACTION"

    @property
    def is_blind_append(self) -> bool:
        """Only an explicit ``isBlindAppend: true`` counts (delta-rs never writes it)."""
        info = self.commit_info
        return bool(info and info.data.get("isBlindAppend") is True)

    @property
    def info_json(self) -> dict[str, Any]:
        return dict(self.commit_info.data) if self.commit_info else {}


def _format_partition(
    values: Mapping[str, str | None] | None, partition_columns: Sequence[str]
) -> str | None:
    if not partition_columns or values is None:
        return None
    parts = []
    for col in partition_columns:
        value = values.get(col)
        parts.append(f"{col}={'null' if value is None else value}")
    return "[" + ", ".join(parts) + "]"


def _conflict(
    cls: type[ConcurrentModificationException],
    message: str,
    winner: WinningCommit,
    partition: str | None = None,
) -> ConcurrentModificationException:
    text = f"{message}\nConflicting commit: {dumps(winner.info_json)}"
    return cls(
        text,
        winning_version=winner.version,
        winning_operation=winner.operation,
        partition=partition,
        winning_commit_info=winner.info_json,
    )


def check_conflicts(current: PendingCommit, winner: WinningCommit) -> None:
    """Raise the first conflict between ``current`` and ``winner`` in Delta's order."""
    _check_protocol(current, winner)
    _check_metadata(current, winner)
    _check_domains(current, winner)
    _check_app_ids(current, winner)
    _check_added_files(current, winner)
    _check_deleted_read(current, winner)
    _check_deleted_deleted(current, winner)


def _check_protocol(current: PendingCommit, winner: WinningCommit) -> None:
    protocol = next((a for a in winner.actions if isinstance(a, Protocol)), None)
    if protocol is None:
        return
    metadata = next((a for a in winner.actions if isinstance(a, Metadata)), None)
    check_writable(protocol, metadata)  # UnsupportedFeatureError: we cannot follow the winner
    hint = ""
    if winner.version == 0:
        hint = (
            " This happened because multiple writers are writing to an empty directory. "
            "Creating the table ahead of time will avoid this conflict."
        )
    message = (
        "The protocol version of the Delta table has been changed by a concurrent update "
        f"(version {winner.version}).{hint} {_RETRY_HINT}"
    )
    if any(isinstance(a, Protocol) for a in current.actions):
        raise _conflict(ProtocolChangedException, message, winner)
    if current.read_protocol is not None:
        before = reader_features(current.read_protocol) | writer_features(current.read_protocol)
        after = reader_features(protocol) | writer_features(protocol)
        if not before <= after:
            raise _conflict(ProtocolChangedException, message, winner)


def _check_metadata(current: PendingCommit, winner: WinningCommit) -> None:
    if any(isinstance(a, Metadata) for a in winner.actions):
        raise _conflict(
            MetadataChangedException,
            f"The metadata of the Delta table {current.table_name} has been changed by a "
            f"concurrent update (version {winner.version}). {_RETRY_HINT}",
            winner,
        )


def _check_domains(current: PendingCommit, winner: WinningCommit) -> None:
    mine = {a.domain for a in current.actions if isinstance(a, DomainMetadata)}
    if not mine:
        return
    for action in winner.actions:
        if isinstance(action, DomainMetadata) and action.domain in mine:
            raise _conflict(
                ConcurrentTransactionException,
                f"A conflicting metadata domain {action.domain} is added by a concurrent "
                f"commit (version {winner.version}).",
                winner,
            )


def _check_app_ids(current: PendingCommit, winner: WinningCommit) -> None:
    written = {a.app_id for a in current.actions if isinstance(a, SetTransaction)}
    depends = current.read_app_ids | written
    if not depends:
        return
    for action in winner.actions:
        if isinstance(action, SetTransaction) and action.app_id in depends:
            raise _conflict(
                ConcurrentTransactionException,
                "This error occurs when multiple streaming queries (or writers) are using the "
                f"same application id {action.app_id!r} to write into this table; the concurrent "
                f"commit is version {winner.version}.",
                winner,
            )


def _candidate_adds(current: PendingCommit, winner: WinningCommit) -> list[AddFile]:
    adds = [a for a in winner.actions if isinstance(a, AddFile)]
    level = current.isolation_level
    if level is IsolationLevel.SNAPSHOT_ISOLATION or not adds:
        return []
    if level is IsolationLevel.WRITE_SERIALIZABLE and not current.metadata_changed:
        return [] if winner.is_blind_append else adds  # blind appends may be ordered before us
    return adds


def _check_added_files(current: PendingCommit, winner: WinningCommit) -> None:
    candidates = _candidate_adds(current, winner)
    if not candidates or current.is_blind_append:
        return
    metadata = current.partition_metadata
    partition_columns = list(metadata.partition_columns) if metadata else []
    hit: AddFile | None = None
    if current.read_whole_table or not partition_columns:
        hit = candidates[0]
    elif current.read_predicates:
        hit = _first_match(candidates, current.read_predicates, metadata)
    if hit is None:
        return
    partition = _format_partition(hit.partition_values, partition_columns)
    where = f" in the partition {partition}" if partition else ""
    raise _conflict(
        ConcurrentAppendException,
        f"Transaction conflict detected. A concurrent {winner.operation} added data to table "
        f"{current.table_name} committed at version {winner.version}. The concurrent operation "
        f"modified data{where} that should have been read by this operation. {_RETRY_HINT}",
        winner,
        partition,
    )


def _first_match(
    adds: list[AddFile], predicates: Sequence[BoundPredicate], metadata: Metadata | None
) -> AddFile | None:
    """The first added file any recorded partition predicate matches; on any evaluation problem
    the first file (conservative: an unevaluable predicate is a conflict)."""
    if metadata is None:
        return adds[0]
    try:
        fields = parse_schema(metadata.schema_string)
        values = typed_partition_values(
            [a.partition_values for a in adds], fields, list(metadata.partition_columns)
        )
        mask: pa.Array | None = None
        for predicate in predicates:
            one = predicate.matches(values)
            mask = one if mask is None else pc.or_(mask, one)
        if mask is None:
            return None
        hits = mask.to_pylist()
    except Exception:  # evaluation failed: assume the worst
        return adds[0]
    return next((a for a, h in zip(adds, hits, strict=True) if h), None)


def _check_deleted_read(current: PendingCommit, winner: WinningCommit) -> None:
    removes = [a for a in winner.actions if isinstance(a, RemoveFile)]
    if not removes:
        return
    hit = next((r for r in removes if r.path in current.read_files), None)
    if hit is None and current.read_whole_table:
        hit = removes[0]
    if hit is None:
        return
    partition = _remove_partition(hit, current)
    where = f" in the partition {partition}" if partition else ""
    raise _conflict(
        ConcurrentDeleteReadException,
        f"Transaction conflict detected. A concurrent {winner.operation} deleted data{where} "
        f"from table {current.table_name} (committed at version {winner.version}) that this "
        f"transaction read (file {hit.path}). {_RETRY_HINT}",
        winner,
        partition,
    )


def _check_deleted_deleted(current: PendingCommit, winner: WinningCommit) -> None:
    mine = {a.path for a in current.actions if isinstance(a, RemoveFile)}
    if not mine:
        return
    hit = next((a for a in winner.actions if isinstance(a, RemoveFile) and a.path in mine), None)
    if hit is None:
        return
    partition = _remove_partition(hit, current)
    where = f" in the partition {partition}" if partition else ""
    raise _conflict(
        ConcurrentDeleteDeleteException,
        f"Transaction conflict detected. A concurrent {winner.operation} deleted data{where} "
        f"from table {current.table_name} (committed at version {winner.version}) that this "
        f"transaction attempted to delete (file {hit.path}). {_RETRY_HINT}",
        winner,
        partition,
    )


def _remove_partition(remove: RemoveFile, current: PendingCommit) -> str | None:
    metadata = current.partition_metadata
    columns = list(metadata.partition_columns) if metadata else []
    return _format_partition(remove.partition_values, columns)
