"""Custom-resource models of txntable: typed specs and statuses, conditions, constants.

This package imports nothing else of txntable (an import-linter contract checks it), so the
controller, the launchers, the CLI and the tests can all share it.

The package itself imports nothing: a module that needs one small piece (``api.quantity`` to
parse a size, ``api.defaults``) must not pay for every model. The names below are loaded from
their modules on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txntable.api.conditions import (
        Condition,
        ConditionStatus,
        ConditionType,
        EventReason,
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
    "EventReason",
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

#: public name -> the module that defines it
_LAZY = {
    **dict.fromkeys(
        (
            "Condition",
            "ConditionStatus",
            "ConditionType",
            "EventReason",
            "Reason",
            "get_condition",
            "is_condition_true",
            "set_condition",
        ),
        "txntable.api.conditions",
    ),
    **dict.fromkeys(("ApiError", "InvalidSpecError"), "txntable.api.errors"),
    **dict.fromkeys(
        (
            "CheckpointPolicy",
            "CheckpointPolicySpec",
            "CompactionPolicy",
            "CompactionPolicySpec",
            "PolicyStatus",
            "TxnTable",
            "TxnTableSpec",
            "TxnTableStatus",
        ),
        "txntable.api.types",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
