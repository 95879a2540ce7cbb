"""Every spec and status model of the custom resources, in one import.

The models are frozen dataclasses, split by resource into ``common``, ``table`` and
``policies`` to keep modules small; this module is the place to import them from. Each
resource has ``from_manifest(obj)`` (parse + validate, raising ``InvalidSpecError`` with a
field path) and its status has ``to_status()``.
"""

from __future__ import annotations

from txntable.api.common import (
    Backend,
    DriverSpec,
    ExecutorSpec,
    LabelSelector,
    LabelSelectorRequirement,
    LocalObjectReference,
    PolicyPhase,
    PolicyStatus,
    PullPolicy,
    RunOutcome,
    RunRecord,
    SecretReference,
    SelectorOperator,
    SparkTemplate,
)
from txntable.api.meta import ObjectMeta
from txntable.api.policies import (
    CheckpointMode,
    CheckpointPolicy,
    CheckpointPolicySpec,
    CommitSettings,
    CompactionPolicy,
    CompactionPolicySpec,
    CompactionTriggers,
    ConcurrencyPolicy,
    DictionaryMode,
    FilterOperator,
    LogCleanup,
    MaintenanceWindow,
    ParquetCodec,
    ParquetWriteSettings,
    PartitionFilter,
    VacuumSettings,
    Weekday,
)
from txntable.api.table import (
    ColumnSpec,
    CreateSpec,
    StorageSpec,
    TablePhase,
    TableProtocol,
    TxnTable,
    TxnTableSpec,
    TxnTableStatus,
)

__all__ = [
    "Backend",
    "CheckpointMode",
    "CheckpointPolicy",
    "CheckpointPolicySpec",
    "ColumnSpec",
    "CommitSettings",
    "CompactionPolicy",
    "CompactionPolicySpec",
    "CompactionTriggers",
    "ConcurrencyPolicy",
    "CreateSpec",
    "DictionaryMode",
    "DriverSpec",
    "ExecutorSpec",
    "FilterOperator",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LocalObjectReference",
    "LogCleanup",
    "MaintenanceWindow",
    "ObjectMeta",
    "ParquetCodec",
    "ParquetWriteSettings",
    "PartitionFilter",
    "PolicyPhase",
    "PolicyStatus",
    "PullPolicy",
    "RunOutcome",
    "RunRecord",
    "SecretReference",
    "SelectorOperator",
    "SparkTemplate",
    "StorageSpec",
    "TablePhase",
    "TableProtocol",
    "TxnTable",
    "TxnTableSpec",
    "TxnTableStatus",
    "VacuumSettings",
    "Weekday",
]
