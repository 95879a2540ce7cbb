"""Pre-commit validation: refuse a commit that would break the protocol before anything is written.

Once a commit file exists it can never be taken back, so every rule a single commit must obey
(PROTOCOL.md "Requirements for Writers", "Actions") is checked here, in Spark's order
(``prepareCommit``/``commitImpl``): deduplicate ``txn``; one metadata and one protocol at most, the
first version carries both; protocol changes only upgrade and both protocols are writable by this
engine (``features.check_writable``); partition values name exactly the partition columns;
append-only tables lose no data; no duplicate file actions and one ``dataChange`` value;
feature-specific checks.
The result is the ordered list of actions to write (commitInfo is added by the transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidActionError, InvalidCommitError
from txntable.engine.model.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CheckpointMetadata,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    Sidecar,
)
from txntable.engine.model.features import check_writable, reader_features, writer_features
from txntable.engine.model.physical import partition_physical_names
from txntable.engine.model.schema import parse_schema
from txntable.engine.read.state import encode_key, key_column

DEFAULT_PROTOCOL = Protocol(min_reader_version=1, min_writer_version=2)


@dataclass(frozen=True)
class PreparedCommit:
    """Validated actions in write order, and the protocol/metadata in force after the commit."""

    actions: list[Action]
    protocol: Protocol
    metadata: Metadata
    protocol_changed: bool
    metadata_changed: bool


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def prepare_commit(
    actions: Sequence[Action],
    read_protocol: Protocol | None,
    read_metadata: Metadata | None,
    live_files: pa.Table | None = None,
) -> PreparedCommit:
    """Validate a transaction's actions against the state it read (``None`` = new table)."""
    for action in actions:
        if isinstance(action, CommitInfo | CheckpointMetadata | Sidecar):
            raise InvalidCommitError(
                f"a {action.KEY} action cannot be added to a commit "
                "(commitInfo is written by the transaction; the others belong in checkpoints)",
                "DELTA_INVALID_COMMIT_ACTION",
            )
    txns = _dedup_txns(actions)
    protocol, metadata = _single_protocol_and_metadata(actions, read_protocol, read_metadata)
    new_protocol = protocol or read_protocol or DEFAULT_PROTOCOL
    new_metadata = metadata or read_metadata
    assert new_metadata is not None  # _single_protocol_and_metadata guarantees it
    files = [a for a in actions if isinstance(a, AddFile | RemoveFile | AddCDCFile)]
    rows_unchanged = (
        protocol is None
        and metadata is None
        and read_protocol is not None
        and all(isinstance(a, AddFile | RemoveFile) and not a.data_change for a in files)
    )
    _check_protocol(
        read_protocol,
        read_metadata,
        protocol,
        new_protocol,
        new_metadata,
        rows_unchanged=rows_unchanged,
    )
    _check_metadata(new_metadata)
    _check_partition_values(files, new_metadata)
    _check_append_only(files, read_metadata or new_metadata)
    _check_duplicates(files, live_files)
    _check_data_change(files)
    domains = [a for a in actions if isinstance(a, DomainMetadata)]
    _check_features(files, domains, new_protocol, new_metadata)
    ordered: list[Action] = []
    if protocol is not None or read_protocol is None:
        ordered.append(new_protocol)
    if metadata is not None:
        ordered.append(metadata)
    ordered.extend(domains)
    ordered.extend(txns)
    ordered.extend(files)
    return PreparedCommit(
        ordered,
        new_protocol,
        new_metadata,
        protocol_changed=protocol is not None or read_protocol is None,
        metadata_changed=metadata is not None,
    )


def _dedup_txns(actions: Sequence[Action]) -> list[SetTransaction]:
    by_app: dict[str, SetTransaction] = {}
    for action in actions:
        if not isinstance(action, SetTransaction):
            continue
        seen = by_app.get(action.app_id)
        if seen is None:
            by_app[action.app_id] = action
        elif seen.version != action.version:
            raise InvalidCommitError(
                f"two txn actions for app id {action.app_id!r} with different versions "
                f"({seen.version} and {action.version}) in one commit",
                "DELTA_CONFLICTING_SET_TRANSACTION",
            )
    return list(by_app.values())


def _single_protocol_and_metadata(
    actions: Sequence[Action], read_protocol: Protocol | None, read_metadata: Metadata | None
) -> tuple[Protocol | None, Metadata | None]:
    protocols = [a for a in actions if isinstance(a, Protocol)]
    metadatas = [a for a in actions if isinstance(a, Metadata)]
    if len(metadatas) > 1:
        raise InvalidCommitError(
            f"a commit may change the metadata once, found {len(metadatas)} metaData actions",
            "DELTA_MULTIPLE_METADATA_CHANGES",
        )
    if len(protocols) > 1:
        raise InvalidCommitError(
            f"a commit may change the protocol once, found {len(protocols)} protocol actions",
            "DELTA_MULTIPLE_PROTOCOL_CHANGES",
        )
    if read_metadata is None and not metadatas:
        raise InvalidCommitError(
            "the first commit of a table must contain a metaData action", "DELTA_METADATA_ABSENT"
        )
    return (protocols[0] if protocols else None), (metadatas[0] if metadatas else None)


def _features(protocol: Protocol) -> frozenset[str]:
    return reader_features(protocol) | writer_features(protocol)


def _check_protocol(
    read_protocol: Protocol | None,
    read_metadata: Metadata | None,
    changed: Protocol | None,
    new_protocol: Protocol,
    new_metadata: Metadata,
    *,
    rows_unchanged: bool = False,
) -> None:
    if read_protocol is not None:
        check_writable(read_protocol, read_metadata, rows_unchanged=rows_unchanged)
    if changed is not None and read_protocol is not None:
        upgrade = (
            changed.min_reader_version >= read_protocol.min_reader_version
            and changed.min_writer_version >= read_protocol.min_writer_version
            and _features(read_protocol) <= _features(changed)
        )
        if not upgrade:
            raise InvalidCommitError(
                f"protocol change from ({read_protocol.min_reader_version},"
                f"{read_protocol.min_writer_version}) to ({changed.min_reader_version},"
                f"{changed.min_writer_version}) is not an upgrade (features may only be added)",
                "DELTA_INVALID_PROTOCOL_DOWNGRADE",
            )
    if new_protocol.min_reader_version == 3 and not set(new_protocol.reader_features or ()) <= set(
        new_protocol.writer_features or ()
    ):
        raise InvalidCommitError(
            "every reader feature must also be listed as a writer feature",
            "DELTA_INVALID_PROTOCOL",
        )
    try:
        check_writable(new_protocol, new_metadata, rows_unchanged=rows_unchanged)
    except InvalidActionError as exc:
        raise InvalidCommitError(f"invalid metaData: {exc}", "DELTA_INVALID_METADATA") from exc


def _check_metadata(metadata: Metadata) -> None:
    if not metadata.id:
        raise InvalidCommitError(
            "metaData.id must be a non-empty table id", "DELTA_INVALID_METADATA"
        )
    try:
        fields = parse_schema(metadata.schema_string)
    except InvalidActionError as exc:
        raise InvalidCommitError(str(exc), "DELTA_INVALID_METADATA") from exc
    names = {f.name.lower() for f in fields}
    columns = [c.lower() for c in metadata.partition_columns]
    missing = [c for c in metadata.partition_columns if c.lower() not in names]
    if missing or len(set(columns)) != len(columns):
        raise InvalidCommitError(
            f"partition columns {metadata.partition_columns} must be distinct columns of the "
            f"schema (unknown: {missing})",
            "DELTA_INVALID_PARTITION_COLUMN",
        )


def _check_partition_values(
    files: Sequence[AddFile | RemoveFile | AddCDCFile], metadata: Metadata
) -> None:
    expected = set(metadata.partition_columns)
    if metadata.configuration.get("delta.columnMapping.mode", "none").lower() != "none":
        try:  # column mapping: partition values are keyed by the columns' physical names
            fields = parse_schema(metadata.schema_string)
            physical = partition_physical_names(
                fields, metadata.partition_columns, metadata.configuration
            )
        except InvalidActionError as exc:
            raise InvalidCommitError(f"invalid metaData: {exc}", "DELTA_INVALID_METADATA") from exc
        expected = set(physical.values())
    for action in files:
        if isinstance(action, AddFile) and set(action.partition_values) != expected:
            raise InvalidCommitError(
                f"add {action.path!r} has partition values for {sorted(action.partition_values)} "
                f"but the table is partitioned by {sorted(expected)}",
                "DELTA_INVALID_PARTITIONING_SCHEMA",
            )


def _check_append_only(
    files: Sequence[AddFile | RemoveFile | AddCDCFile], metadata: Metadata
) -> None:
    if not is_true(metadata.configuration.get("delta.appendOnly")):
        return
    removing = next((a for a in files if isinstance(a, RemoveFile) and a.data_change), None)
    if removing is not None:
        raise InvalidCommitError(
            f"this table is append-only (delta.appendOnly=true): cannot remove {removing.path!r} "
            "with dataChange=true",
            "DELTA_CANNOT_MODIFY_APPEND_ONLY",
        )


def _check_duplicates(
    files: Sequence[AddFile | RemoveFile | AddCDCFile], live_files: pa.Table | None
) -> None:
    adds: dict[str, AddFile] = {}
    removes: dict[str, RemoveFile] = {}
    for action in files:
        if isinstance(action, AddCDCFile):
            continue
        seen: dict[str, AddFile] | dict[str, RemoveFile] = (
            adds if isinstance(action, AddFile) else removes
        )
        if action.path in seen:
            raise InvalidCommitError(
                f"duplicate {action.KEY} actions for path {action.path!r} in one commit",
                "DELTA_DUPLICATE_ACTIONS_FOUND",
            )
        seen[action.path] = action  # type: ignore[assignment]
    for path, add in adds.items():
        remove = removes.get(path)
        if remove is not None and remove.key == add.key:
            raise InvalidCommitError(
                f"the commit both adds and removes {path!r} with the same deletion vector",
                "DELTA_DUPLICATE_ACTIONS_FOUND",
            )
    if live_files is None or not adds or live_files.num_rows == 0:
        return
    live = live_files.filter(pc.is_in(live_files.column("path"), pa.array(list(adds), pa.string())))
    removed_keys = {encode_key(r.key) for r in removes.values()}
    for path, key in zip(
        live.column("path").to_pylist(), key_column(live).to_pylist(), strict=True
    ):
        add = adds[path]
        if key != encode_key(add.key) and key not in removed_keys:
            raise InvalidCommitError(
                f"add {path!r} changes the deletion vector of a live file without removing the "
                "live (path, deletion vector) in the same commit",
                "DELTA_DUPLICATE_ACTIONS_FOUND",
            )


def _check_data_change(files: Sequence[AddFile | RemoveFile | AddCDCFile]) -> None:
    values = {a.data_change for a in files if isinstance(a, AddFile | RemoveFile)}
    if len(values) > 1:
        raise InvalidCommitError(
            "all add and remove actions of one commit must have the same dataChange value",
            "DELTA_INCONSISTENT_DATA_CHANGE",
        )


def _check_features(
    files: Sequence[AddFile | RemoveFile | AddCDCFile],
    domains: Sequence[DomainMetadata],
    protocol: Protocol,
    metadata: Metadata,
) -> None:
    features = writer_features(protocol)
    seen_domains: set[str] = set()
    for domain in domains:
        if "domainMetadata" not in features:
            raise InvalidCommitError(
                f"domainMetadata {domain.domain!r} needs the domainMetadata writer feature",
                "DELTA_DOMAIN_METADATA_NOT_SUPPORTED",
            )
        if domain.domain.startswith("delta."):
            raise InvalidCommitError(
                f"domain {domain.domain!r} is system-controlled; this engine does not modify it",
                "DELTA_CANNOT_MODIFY_SYSTEM_DOMAIN",
            )
        if domain.domain in seen_domains:
            raise InvalidCommitError(
                f"two domainMetadata actions for domain {domain.domain!r} in one commit",
                "DELTA_DUPLICATE_DOMAIN_METADATA",
            )
        seen_domains.add(domain.domain)
    if "deletionVectors" not in features:
        with_dv = next(
            (a for a in files if isinstance(a, AddFile) and a.deletion_vector is not None), None
        )
        if with_dv is not None:
            raise InvalidCommitError(
                f"add {with_dv.path!r} carries a deletion vector but the table does not support "
                "the deletionVectors feature",
                "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
            )
    if is_true(metadata.configuration.get("delta.enableInCommitTimestamps")) and (
        "inCommitTimestamp" not in features
    ):
        raise InvalidCommitError(
            "delta.enableInCommitTimestamps=true needs the inCommitTimestamp writer feature in "
            "the protocol (writer version 7)",
            "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
        )
