"""txntable: keep lakehouse (Delta Lake) tables healthy on Kubernetes.

The public Python surface is small: ``Table`` opens, creates and writes a Delta table and gives
``Snapshot``s; ``Transaction`` is for callers that bring their own actions (OPTIMIZE does).
"""

import importlib.metadata

from txntable.engine import CommitOptions, CommitResult, Snapshot, Table, Transaction
from txntable.engine.errors import ConcurrentModificationException, EngineError

__all__ = [
    "CommitOptions",
    "CommitResult",
    "ConcurrentModificationException",
    "EngineError",
    "Snapshot",
    "Table",
    "Transaction",
]

# One version source: the installed distribution (pyproject.toml); the chart is tested against it.
try:
    __version__ = importlib.metadata.version("txntable")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree not installed
    __version__ = "0+unknown"
