"""The shared transaction engine: the Delta Lake log protocol, read and write.

Nothing here knows about Kubernetes, Kopf or Spark; every process that reads or commits a table
goes through this package.

The package itself imports nothing: ``from txntable.engine.errors import EngineError`` (what the
command line and the controller need first) must not pay for pyarrow and the log reader. The
names below are loaded from their modules on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.table import Table

__all__ = ["CommitOptions", "CommitResult", "Snapshot", "Table", "Transaction"]

#: public name -> the module that defines it
_LAZY = {
    "CommitOptions": "txntable.engine.commit.transaction",
    "CommitResult": "txntable.engine.commit.transaction",
    "Snapshot": "txntable.engine.read.snapshot",
    "Table": "txntable.engine.table",
    "Transaction": "txntable.engine.commit.transaction",
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
