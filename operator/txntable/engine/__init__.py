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

This package is the engine's public face: code outside the engine imports from
``txntable.engine`` only, never from its modules (pyproject.toml's protected contract; the
decision is in docs/architecture.md, "The engine's public face"). The exceptions are the
engine's Spark-side extensions, which do engine-level work where the engine may not import
Spark: ``txntable.maintenance`` (OPTIMIZE's and VACUUM's executors write and list data files
the engine's way) and ``txntable.jobs.checkpoint`` (a checkpoint whose state Spark rebuilds).
A name joins ``__all__`` when a caller outside needs it; what is not here may change without a
caller noticing.

The package itself imports nothing: ``from txntable.engine import EngineError`` (what the command
line and the controller need first) must not pay for pyarrow and the log reader. Each name is
loaded from its module on first use (PEP 562), so ``from txntable.engine import Table,
open_storage`` costs what importing those two modules costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txntable.engine.checkpoint import retention
    from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
    from txntable.engine.checkpoint.write import write_checkpoint
    from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
    from txntable.engine.errors import (
        ConcurrentModificationException,
        CorruptLogError,
        EngineError,
        InvalidActionError,
        InvalidArgumentError,
        RetentionTooShortError,
        StorageError,
        TableNotFoundError,
        UnsupportedFeatureError,
        VersionNotFoundError,
    )
    from txntable.engine.model.actions import Metadata, Protocol
    from txntable.engine.model.features import check_maintainable, check_writable
    from txntable.engine.model.physical import partition_physical_names
    from txntable.engine.model.predicates import bind, typed_partition_values
    from txntable.engine.model.schema import parse_schema, to_arrow_type
    from txntable.engine.observer import OUTCOMES, CommitEvent, CommitObserver
    from txntable.engine.read.activity import read_recent_activity
    from txntable.engine.read.handle import TableHandle
    from txntable.engine.read.segment import CheckpointRef
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.read.summary import TableSummary
    from txntable.engine.storage.base import FileInfo, LocalStorage, Storage
    from txntable.engine.storage.factory import open_storage
    from txntable.engine.storage.paths import LOG_DIR
    from txntable.engine.storage.s3 import parse_s3_uri
    from txntable.engine.storage.s3_options import parse_s3_options, s3_options_with_environment
    from txntable.engine.table import Table
    from txntable.engine.testhooks import pause_point
    from txntable.engine.vacuum import VacuumResult, iceberg_hold_note
    from txntable.engine.vacuum import vacuum as vacuum_table
    from txntable.engine.write.parquet_options import ParquetSettings

__all__ = [
    "LOG_DIR",
    "OUTCOMES",
    "CheckpointRef",
    "CommitEvent",
    "CommitObserver",
    "CommitOptions",
    "CommitResult",
    "ConcurrentModificationException",
    "CorruptLogError",
    "EngineError",
    "FileInfo",
    "InvalidActionError",
    "InvalidArgumentError",
    "LocalStorage",
    "Metadata",
    "ParquetSettings",
    "Protocol",
    "RetentionTooShortError",
    "Snapshot",
    "Storage",
    "StorageError",
    "Table",
    "TableHandle",
    "TableNotFoundError",
    "TableSummary",
    "Transaction",
    "UnsupportedFeatureError",
    "VacuumResult",
    "VersionNotFoundError",
    "bind",
    "check_maintainable",
    "check_writable",
    "cleanup_expired_logs",
    "iceberg_hold_note",
    "open_storage",
    "parse_s3_options",
    "parse_s3_uri",
    "parse_schema",
    "partition_physical_names",
    "pause_point",
    "read_recent_activity",
    "retention",
    "s3_options_with_environment",
    "to_arrow_type",
    "typed_partition_values",
    "vacuum_table",
    "write_checkpoint",
]

#: public name -> (the module that defines it, its name there); a name of ``None`` is the
#: module itself
_LAZY: dict[str, tuple[str, str | None]] = {
    # tables, snapshots, the controller's summary, commits
    "Table": ("txntable.engine.table", "Table"),
    "TableHandle": ("txntable.engine.read.handle", "TableHandle"),
    "Snapshot": ("txntable.engine.read.snapshot", "Snapshot"),
    "TableSummary": ("txntable.engine.read.summary", "TableSummary"),
    "CheckpointRef": ("txntable.engine.read.segment", "CheckpointRef"),
    "read_recent_activity": ("txntable.engine.read.activity", "read_recent_activity"),
    "Transaction": ("txntable.engine.commit.transaction", "Transaction"),
    "CommitOptions": ("txntable.engine.commit.transaction", "CommitOptions"),
    "CommitResult": ("txntable.engine.commit.transaction", "CommitResult"),
    # the log's model: actions, features, schema, partition predicates, Parquet settings
    "Metadata": ("txntable.engine.model.actions", "Metadata"),
    "Protocol": ("txntable.engine.model.actions", "Protocol"),
    "check_maintainable": ("txntable.engine.model.features", "check_maintainable"),
    "check_writable": ("txntable.engine.model.features", "check_writable"),
    "parse_schema": ("txntable.engine.model.schema", "parse_schema"),
    "to_arrow_type": ("txntable.engine.model.schema", "to_arrow_type"),
    "bind": ("txntable.engine.model.predicates", "bind"),
    "typed_partition_values": ("txntable.engine.model.predicates", "typed_partition_values"),
    "partition_physical_names": ("txntable.engine.model.physical", "partition_physical_names"),
    "ParquetSettings": ("txntable.engine.write.parquet_options", "ParquetSettings"),
    # maintenance steps and the table properties that govern them
    "write_checkpoint": ("txntable.engine.checkpoint.write", "write_checkpoint"),
    "cleanup_expired_logs": ("txntable.engine.checkpoint.cleanup", "cleanup_expired_logs"),
    "retention": ("txntable.engine.checkpoint.retention", None),
    # (not ``vacuum``: that is also the name of the submodule, which importing it binds here)
    "vacuum_table": ("txntable.engine.vacuum", "vacuum"),
    "VacuumResult": ("txntable.engine.vacuum", "VacuumResult"),
    "iceberg_hold_note": ("txntable.engine.vacuum", "iceberg_hold_note"),
    # storage
    "Storage": ("txntable.engine.storage.base", "Storage"),
    "LocalStorage": ("txntable.engine.storage.base", "LocalStorage"),
    "FileInfo": ("txntable.engine.storage.base", "FileInfo"),
    "open_storage": ("txntable.engine.storage.factory", "open_storage"),
    "parse_s3_options": ("txntable.engine.storage.s3_options", "parse_s3_options"),
    "s3_options_with_environment": (
        "txntable.engine.storage.s3_options",
        "s3_options_with_environment",
    ),
    "parse_s3_uri": ("txntable.engine.storage.s3", "parse_s3_uri"),
    "LOG_DIR": ("txntable.engine.storage.paths", "LOG_DIR"),
    # the commit observer the metrics implement
    "CommitEvent": ("txntable.engine.observer", "CommitEvent"),
    "CommitObserver": ("txntable.engine.observer", "CommitObserver"),
    "OUTCOMES": ("txntable.engine.observer", "OUTCOMES"),
    # named pause points for tests (inert unless TXNTABLE_TEST_PAUSE_AT names one)
    "pause_point": ("txntable.engine.testhooks", "pause_point"),
    # errors (errors.py draws the hierarchy)
    "EngineError": ("txntable.engine.errors", "EngineError"),
    "InvalidActionError": ("txntable.engine.errors", "InvalidActionError"),
    "InvalidArgumentError": ("txntable.engine.errors", "InvalidArgumentError"),
    "StorageError": ("txntable.engine.errors", "StorageError"),
    "RetentionTooShortError": ("txntable.engine.errors", "RetentionTooShortError"),
    "TableNotFoundError": ("txntable.engine.errors", "TableNotFoundError"),
    "VersionNotFoundError": ("txntable.engine.errors", "VersionNotFoundError"),
    "CorruptLogError": ("txntable.engine.errors", "CorruptLogError"),
    "UnsupportedFeatureError": ("txntable.engine.errors", "UnsupportedFeatureError"),
    "ConcurrentModificationException": (
        "txntable.engine.errors",
        "ConcurrentModificationException",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import sys  # (always loaded; importlib is not, and would cost a cheap caller a millisecond)

    module_name, attribute = _LAZY[name]
    __import__(module_name)
    module = sys.modules[module_name]
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
