"""The shared transaction engine: the Delta Lake log protocol, read and write.

Nothing here knows about Kubernetes, Kopf or Spark; every process that reads or commits a table
goes through this package. Its modules sit in stages, each importing only the stages below it
(pyproject.toml's layers contract; docs/architecture.md draws the map):

- ``table``, ``vacuum``: the public handle on a table, and VACUUM (which commits through it)
- ``write/``: Parquet data files, row deletes, create/append/overwrite/delete (``write.api``)
- ``commit/``: one optimistic transaction (validate, isolation, conflicts, row tracking, commit
  file) and ``checkpoint/``: checkpoints, log clean-up, retention, the post-commit hook
- ``read/``: log segment, checkpoints read, reconciled state, ``Snapshot``, summary, activity
- ``model/``: actions, schema, table features, column mapping, predicates, stats, deletion vectors
- ``storage/``: the ``Storage`` interface, local/memory/S3/Azure stores, ``open_storage``
- ``errors``, ``observer``, ``testhooks``: used by every stage

The package itself imports nothing: ``from txntable.engine.errors import EngineError`` (what the
command line and the controller need first) must not pay for pyarrow and the log reader. The
names below are what callers outside the engine use most; each is loaded from its module on
first use (PEP 562), so ``from txntable.engine import Table, open_storage`` costs what importing
those two modules costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
    from txntable.engine.checkpoint.write import write_checkpoint
    from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
    from txntable.engine.errors import (
        ConcurrentModificationException,
        CorruptLogError,
        EngineError,
        InvalidArgumentError,
        StorageError,
        TableNotFoundError,
        UnsupportedFeatureError,
        VersionNotFoundError,
    )
    from txntable.engine.observer import CommitEvent, CommitObserver
    from txntable.engine.read.handle import TableHandle
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.read.summary import TableSummary
    from txntable.engine.storage.base import FileInfo, LocalStorage, Storage
    from txntable.engine.storage.factory import open_storage
    from txntable.engine.table import Table

__all__ = [
    "CommitEvent",
    "CommitObserver",
    "CommitOptions",
    "CommitResult",
    "ConcurrentModificationException",
    "CorruptLogError",
    "EngineError",
    "FileInfo",
    "InvalidArgumentError",
    "LocalStorage",
    "Snapshot",
    "Storage",
    "StorageError",
    "Table",
    "TableHandle",
    "TableNotFoundError",
    "TableSummary",
    "Transaction",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "cleanup_expired_logs",
    "open_storage",
    "write_checkpoint",
]

#: public name -> the module that defines it
_LAZY = {
    "Table": "txntable.engine.table",
    "Snapshot": "txntable.engine.read.snapshot",
    "Transaction": "txntable.engine.commit.transaction",
    "CommitOptions": "txntable.engine.commit.transaction",
    "CommitResult": "txntable.engine.commit.transaction",
    "TableHandle": "txntable.engine.read.handle",
    "Storage": "txntable.engine.storage.base",
    "LocalStorage": "txntable.engine.storage.base",
    "FileInfo": "txntable.engine.storage.base",
    "open_storage": "txntable.engine.storage.factory",
    "TableSummary": "txntable.engine.read.summary",
    "write_checkpoint": "txntable.engine.checkpoint.write",
    "cleanup_expired_logs": "txntable.engine.checkpoint.cleanup",
    "CommitEvent": "txntable.engine.observer",
    "CommitObserver": "txntable.engine.observer",
    "EngineError": "txntable.engine.errors",
    "InvalidArgumentError": "txntable.engine.errors",
    "StorageError": "txntable.engine.errors",
    "TableNotFoundError": "txntable.engine.errors",
    "VersionNotFoundError": "txntable.engine.errors",
    "CorruptLogError": "txntable.engine.errors",
    "UnsupportedFeatureError": "txntable.engine.errors",
    "ConcurrentModificationException": "txntable.engine.errors",
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
