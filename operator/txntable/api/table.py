"""The TxnTable custom resource: one Delta table, where it lives, how to reach it, its health.

``TxnTable.from_manifest`` parses and validates a manifest the way the CRD does (schema plus
CEL rules, including the transition rule that ``spec.location`` never changes) and raises
``InvalidSpecError`` with the field path. ``TxnTableStatus.to_status`` renders the status
subresource.
"""

# ruff: noqa: RUF009  (spec_field is our dataclasses.field wrapper; its defaults are immutable)

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from txntable.api import defaults as d
from txntable.api._codec import DURATION, from_obj, spec_field, to_obj
from txntable.api.common import (
    EMPTY,
    LocalObjectReference,
    RunRecord,
    SecretReference,
    reject_secret_keys,
)
from txntable.api.conditions import Condition
from txntable.api.constants import KIND_TABLE
from txntable.api.errors import InvalidSpecError
from txntable.api.meta import ObjectMeta, envelope, read_manifest

LOCATION_PATTERN: Final = r"^((s3|s3a|abfs|abfss|az|azure|file|memory)://.+|/.*|\.{1,2}/.*)$"
COLUMN_TYPE_PATTERN: Final = (
    r"^(string|long|integer|short|byte|float|double|boolean|binary|date|timestamp"
    r"|timestamp_ntz|decimal\(([1-9]|[12][0-9]|3[0-8]),([0-9]|[12][0-9]|3[0-8])\))$"
)
#: An SQS queue URL as AWS (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME) or an emulator prints it.
SQS_QUEUE_URL_PATTERN: Final = r"^https?://[^/\s]+/[^\s]+$"
MSG_LOCATION_IMMUTABLE: Final = (
    "location is immutable: create a new TxnTable to manage another table"
)
MSG_PARTITION_COLUMNS: Final = "every partition column must be one of the columns"
MSG_DUPLICATE_COLUMN: Final = "column names must be unique"


class TablePhase(StrEnum):
    """Short state of a table, for the printer column."""

    PENDING = "Pending"
    READY = "Ready"
    COMPACTING = "Compacting"
    CHECKPOINTING = "Checkpointing"
    DEGRADED = "Degraded"
    AWAITING_APPROVAL = "AwaitingApproval"
    UNREACHABLE = "Unreachable"
    SUSPENDED = "Suspended"
    INVALID = "Invalid"


@dataclass(frozen=True, kw_only=True)
class StorageSpec:
    """Non-secret storage options plus the Secret that holds the credentials."""

    options: Mapping[str, str] = spec_field(EMPTY, max_items=64, max_length=4096)
    secret_ref: SecretReference | None = spec_field(None)

    def check(self, path: str) -> None:
        """Mirror of the CEL rule: no option key may name a credential."""
        reject_secret_keys(self.options, f"{path}.options")


@dataclass(frozen=True, kw_only=True)
class NotificationsSpec:
    """Where the table's storage announces new objects, so commits wake the controller."""

    sqs_queue_url: str | None = spec_field(
        None,
        pattern=SQS_QUEUE_URL_PATTERN,
        hint="an SQS queue URL (https://HOST/ACCOUNT/NAME)",
        max_length=1024,
    )


@dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """One top-level column of a table the operator creates."""

    name: str = spec_field(min_length=1, max_length=255)
    type: str = spec_field(
        pattern=COLUMN_TYPE_PATTERN,
        hint="a Delta column type (string, long, integer, short, byte, float, double, boolean, "
        "binary, date, timestamp, timestamp_ntz or decimal(P,S))",
        max_length=32,
    )
    nullable: bool = spec_field(True)
    comment: str | None = spec_field(None, max_length=1024)


@dataclass(frozen=True, kw_only=True)
class CreateSpec:
    """Schema of a table the operator creates when the location holds no table yet."""

    columns: tuple[ColumnSpec, ...] = spec_field(min_items=1, max_items=1000)
    partition_columns: tuple[str, ...] = spec_field((), max_items=16, max_length=255)
    properties: Mapping[str, str] = spec_field(EMPTY, max_items=64, max_length=1024)

    def check(self, path: str) -> None:
        """Mirror of the list-map key (unique names) and the partition-column CEL rule."""
        names = [c.name for c in self.columns]
        for i, name in enumerate(names):
            if name in names[:i]:
                # the item, as the API server reports a duplicate key of a list-map
                raise InvalidSpecError(f"{path}.columns[{i}]", MSG_DUPLICATE_COLUMN)
        for i, part in enumerate(self.partition_columns):
            if part not in names:
                raise InvalidSpecError(f"{path}.partitionColumns[{i}]", MSG_PARTITION_COLUMNS)
            if part in self.partition_columns[:i]:
                raise InvalidSpecError(f"{path}.partitionColumns[{i}]", "duplicate entry")


@dataclass(frozen=True, kw_only=True)
class TxnTableSpec:
    """Desired state of one table."""

    location: str = spec_field(
        pattern=LOCATION_PATTERN,
        hint="a table location: s3://, s3a://, abfss://, az://, file://, memory:// or a path",
        min_length=1,
        max_length=2048,
    )
    storage: StorageSpec = spec_field(factory=StorageSpec)
    create: CreateSpec | None = spec_field(None)
    compaction_policy_ref: LocalObjectReference | None = spec_field(None)
    checkpoint_policy_ref: LocalObjectReference | None = spec_field(None)
    suspend: bool = spec_field(False)
    observe_interval: int = spec_field(kind=DURATION, text_default=d.OBSERVE_INTERVAL)
    notifications: NotificationsSpec | None = spec_field(None)

    def check_update(self, old: TxnTableSpec, path: str) -> None:
        """Mirror of the transition rule ``self == oldSelf`` on ``location``."""
        if self.location != old.location:
            raise InvalidSpecError(f"{path}.location", MSG_LOCATION_IMMUTABLE)

    @property
    def is_local_path(self) -> bool:
        """True for a path without a scheme (local mode; relative to the working directory)."""
        return re.match(r"^[a-z][a-z0-9+.-]*://", self.location) is None


@dataclass(frozen=True, kw_only=True)
class TableProtocol:
    """The table's Delta protocol versions and features."""

    min_reader_version: int = spec_field(minimum=1)
    min_writer_version: int = spec_field(minimum=1)
    reader_features: tuple[str, ...] = spec_field((), max_items=64, max_length=128)
    writer_features: tuple[str, ...] = spec_field((), max_items=64, max_length=128)


class ObservationMode(StrEnum):
    """How the controller learns of new commits."""

    EVENTS = "Events"
    POLLING = "Polling"


class EventSource(StrEnum):
    """What announces new commits when observation is event-driven."""

    LOG_PROBE = "LogProbe"
    SQS = "SQS"


@dataclass(frozen=True, kw_only=True)
class ObservationStatus:
    """Whether commits wake the controller or it polls, and why it polls."""

    mode: ObservationMode = spec_field()
    source: EventSource | None = spec_field(None)
    message: str | None = spec_field(None, max_length=1024)


@dataclass(frozen=True, kw_only=True)
class PlannedPartition:
    """One partition of the next compaction run's plan (``values`` as a predicate)."""

    partition: str = spec_field(max_length=1024)
    bins: int = spec_field(minimum=0)
    files: int = spec_field(minimum=0)
    bytes: int = spec_field(minimum=0)


@dataclass(frozen=True, kw_only=True)
class PlanResources:
    """The Spark resources the next compaction run would be launched with (``launch.sizing``):
    the policy's own figures, or sized from this plan under ``spec.spark.autoSize``, or the
    memory retry after a run that ran out of memory."""

    executors: int = spec_field(minimum=0)
    executor_cores: int = spec_field(minimum=1)
    executor_memory_bytes: int = spec_field(minimum=0)
    driver_memory_bytes: int = spec_field(minimum=0)
    sized_from: str = spec_field(min_length=1, max_length=32)
    reason: str | None = spec_field(None, max_length=1024)


@dataclass(frozen=True, kw_only=True)
class PlanStatus:
    """What the next compaction run would do, computed from the observed log
    (``reconcile.plan``); ``plan_id`` changes only when that work changes."""

    plan_id: str = spec_field(min_length=1, max_length=64)
    bins: int = spec_field(minimum=0)
    files: int = spec_field(minimum=0)
    input_bytes: int = spec_field(minimum=0)
    largest_bin_bytes: int = spec_field(minimum=0)
    deferred_bins: int = spec_field(0, minimum=0)
    partitions: tuple[PlannedPartition, ...] = spec_field((), max_items=5)
    vacuum_files: int | None = spec_field(None, minimum=0)
    vacuum_bytes: int | None = spec_field(None, minimum=0)
    estimated_seconds: int | None = spec_field(None, minimum=0)
    resources: PlanResources | None = spec_field(None)
    exact: bool = spec_field(True)
    note: str | None = spec_field(None, max_length=2048)


@dataclass(frozen=True, kw_only=True)
class RunConflicts:
    """What one finished compaction run lost to other writers (from its result line)."""

    run_name: str = spec_field(min_length=1, max_length=253)
    bins_planned: int = spec_field(minimum=0)
    bins_dropped: int = spec_field(minimum=0)
    commit_attempts: int = spec_field(0, minimum=0)
    commit_retries: int = spec_field(0, minimum=0)


@dataclass(frozen=True, kw_only=True)
class ConflictStatus:
    """Our recent compaction runs' conflicts (newest first) and the back-off they cause
    (``CompactionPolicy.spec.avoidRecentWrites.backOff``)."""

    runs: tuple[RunConflicts, ...] = spec_field((), max_items=20)
    percent: int | None = spec_field(None, minimum=0, maximum=100)
    back_off_until: datetime | None = spec_field(None)


@dataclass(frozen=True, kw_only=True)
class TxnTableStatus:
    """Observed state of one table, read from its transaction log."""

    observed_generation: int | None = spec_field(None, minimum=0)
    phase: TablePhase | None = spec_field(None)
    conditions: tuple[Condition, ...] = spec_field((), max_items=16)
    version: int | None = spec_field(None, minimum=0)
    protocol: TableProtocol | None = spec_field(None)
    files: int | None = spec_field(None, minimum=0)
    size_bytes: int | None = spec_field(None, minimum=0)
    small_files: int | None = spec_field(None, minimum=0)
    files_with_deletion_vectors: int | None = spec_field(None, minimum=0)
    deleted_rows: int | None = spec_field(None, minimum=0)
    reclaimable_bytes: int | None = spec_field(None, minimum=0)
    partitions: int | None = spec_field(None, minimum=0)
    commits_since_checkpoint: int | None = spec_field(None, minimum=0)
    last_commit_time: datetime | None = spec_field(None)
    last_checkpoint_version: int | None = spec_field(None, minimum=0)
    compaction_policy: str | None = spec_field(None, max_length=253)
    checkpoint_policy: str | None = spec_field(None, max_length=253)
    last_compaction: RunRecord | None = spec_field(None)
    last_checkpoint: RunRecord | None = spec_field(None)
    last_vacuum: RunRecord | None = spec_field(None)
    last_vacuum_time: datetime | None = spec_field(None)
    observation: ObservationStatus | None = spec_field(None)
    plan: PlanStatus | None = spec_field(None)
    conflicts: ConflictStatus | None = spec_field(None)
    spent_approval: str | None = spec_field(None, min_length=1, max_length=64)

    def to_status(self) -> dict[str, Any]:
        """The JSON object for the status subresource (unset fields omitted)."""
        return to_obj(self)

    @classmethod
    def from_dict(cls, obj: object) -> TxnTableStatus:
        """Read a status written by ``to_status``; unknown top-level keys are ignored."""
        return from_obj(cls, obj, "status", ignore_unknown=True)


@dataclass(frozen=True, kw_only=True)
class TxnTable:
    """A parsed, validated TxnTable manifest."""

    metadata: ObjectMeta
    spec: TxnTableSpec
    status: TxnTableStatus = field(default_factory=TxnTableStatus)

    @classmethod
    def from_manifest(cls, obj: object, old: object | None = None) -> TxnTable:
        """Parse and validate a manifest; with ``old`` also apply the update (oldSelf) rules."""
        meta, spec, status = read_manifest(
            obj,
            KIND_TABLE,
            lambda raw: from_obj(TxnTableSpec, raw, "spec"),
            TxnTableStatus.from_dict,
        )
        parsed = cls(metadata=meta, spec=spec, status=status)
        if old is not None:
            _, old_spec, _ = envelope(old, KIND_TABLE)
            parsed.spec.check_update(from_obj(TxnTableSpec, old_spec, "spec"), "spec")
        return parsed
