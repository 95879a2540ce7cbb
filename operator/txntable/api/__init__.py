"""Custom-resource models of txntable: typed specs and statuses, conditions, constants.

This package imports nothing else of txntable (an import-linter contract checks it), so the
controller, the launchers, the CLI and the tests can all share it.
"""

from __future__ import annotations

from txntable.api.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    Reason,
    get_condition,
    is_condition_true,
    set_condition,
)
from txntable.api.errors import ApiError, InvalidSpecError
from txntable.api.types import (
    CheckpointPolicy,
    CheckpointPolicySpec,
    CompactionPolicy,
    CompactionPolicySpec,
    PolicyStatus,
    TxnTable,
    TxnTableSpec,
    TxnTableStatus,
)

__all__ = [
    "ApiError",
    "CheckpointPolicy",
    "CheckpointPolicySpec",
    "CompactionPolicy",
    "CompactionPolicySpec",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "InvalidSpecError",
    "PolicyStatus",
    "Reason",
    "TxnTable",
    "TxnTableSpec",
    "TxnTableStatus",
    "get_condition",
    "is_condition_true",
    "set_condition",
]
