"""Isolation levels: the table's level, Delta's downgrade to SnapshotIsolation, ``changesData``.

The level decides which concurrent commits a transaction may ignore (Delta Spark's
``IsolationLevel``; not part of PROTOCOL.md). It is chosen once, before the first attempt, from the
transaction's own prepared actions: a commit that only rearranges data (OPTIMIZE: removes and adds
with ``dataChange=false``) is downgraded to SnapshotIsolation and therefore never conflicts with
concurrent appends, which is what lets maintenance run next to busy writers. The rule is Spark's
(``TransactionHelper.canDowngradeToSnapshotIsolation``), not delta-rs' (which looks at the winner's
actions and in effect never downgrades).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    RemoveFile,
)

ISOLATION_LEVEL_KEY = "delta.isolationLevel"


class IsolationLevel(StrEnum):
    """Delta's isolation levels, strongest first; the value is what ``commitInfo`` records."""

    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"
    SNAPSHOT_ISOLATION = "SnapshotIsolation"


#: Levels a table may declare (SnapshotIsolation is only ever chosen automatically).
_CONFIGURABLE = {
    "serializable": IsolationLevel.SERIALIZABLE,
    "writeserializable": IsolationLevel.WRITE_SERIALIZABLE,
}


def table_isolation_level(configuration: Mapping[str, str]) -> IsolationLevel:
    """The level a table declares in ``delta.isolationLevel`` (case-insensitive; default
    Serializable). Any other value is refused rather than guessed."""
    raw = configuration.get(ISOLATION_LEVEL_KEY)
    if raw is None or raw.strip() == "":
        return IsolationLevel.SERIALIZABLE
    level = _CONFIGURABLE.get(raw.strip().lower())
    if level is None:
        raise InvalidArgumentError(
            f"table property {ISOLATION_LEVEL_KEY}={raw!r} is not supported "
            "(use Serializable or WriteSerializable)"
        )
    return level


#: ``changesData`` of Spark's operations (``DeltaOperations.scala``). Operations not
#: listed default to False, as Spark's ``Operation.changesData`` does.
CHANGES_DATA: Mapping[str, bool] = {
    "WRITE": True,
    "STREAMING UPDATE": True,
    "DELETE": True,
    "TRUNCATE": True,
    "CONVERT": True,
    "MERGE": True,
    "UPDATE": True,
    "RESTORE": True,
    "CLONE": True,
    "CREATE TABLE AS SELECT": True,
    "REPLACE TABLE": True,
    "REPLACE TABLE AS SELECT": True,
    "CREATE OR REPLACE TABLE": True,
    "CREATE OR REPLACE TABLE AS SELECT": True,
    "CREATE TABLE": False,
    "OPTIMIZE": False,
    "REORG": False,
    "COMPUTE STATS": False,
    "ROW TRACKING BACKFILL": False,
    "ROW TRACKING UNBACKFILL": False,
    "OPTIMIZE CHECKPOINT": False,
    "REMOVE COLUMN MAPPING": False,
    "SET TBLPROPERTIES": False,
    "UNSET TBLPROPERTIES": False,
    "ADD COLUMNS": False,
    "DROP COLUMNS": False,
    "RENAME COLUMN": False,
    "CHANGE COLUMN": False,
    "REPLACE COLUMNS": False,
    "ADD CONSTRAINT": False,
    "DROP CONSTRAINT": False,
    "UPGRADE PROTOCOL": False,
    "DROP FEATURE": False,
    "CLUSTER BY": False,
    "VACUUM START": False,
    "VACUUM END": False,
    "Manual Update": False,
    "Empty Commit": False,
    "DOMAIN METADATA CLEANUP": False,
}


def operation_changes_data(operation: str) -> bool:
    """Spark's ``changesData`` for an operation name (unknown operations: False)."""
    return CHANGES_DATA.get(operation, False)


_ROW_TRACKING_DOMAIN = "delta.rowTracking"


def can_downgrade(actions: Iterable[Action], level: IsolationLevel, changes_data: bool) -> bool:
    """Spark's downgrade rule over a transaction's prepared actions (commitInfo excluded)."""
    data_changed = False
    for action in actions:
        if isinstance(action, AddFile | RemoveFile):
            data_changed = data_changed or action.data_change
        elif isinstance(action, AddCDCFile):
            continue  # cdc files never change data
        elif isinstance(action, CommitInfo) or (
            isinstance(action, DomainMetadata) and action.domain == _ROW_TRACKING_DOMAIN
        ):
            continue
        else:
            return False  # metadata, protocol, txn or another domain: keep the table's level
    if level is IsolationLevel.SERIALIZABLE:
        return not data_changed
    if level is IsolationLevel.WRITE_SERIALIZABLE:
        return not data_changed and not changes_data
    return False


def level_to_use(
    actions: Iterable[Action], table_level: IsolationLevel, changes_data: bool
) -> IsolationLevel:
    """The level a commit runs under: SnapshotIsolation when the downgrade applies."""
    if can_downgrade(actions, table_level, changes_data):
        return IsolationLevel.SNAPSHOT_ISOLATION
    return table_level
