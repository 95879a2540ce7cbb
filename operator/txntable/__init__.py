"""txntable: keep lakehouse (Delta Lake) tables healthy on Kubernetes.

The public Python surface is small: ``Table`` opens, creates and writes a Delta table and gives
``Snapshot``s; ``Transaction`` is for callers that bring their own actions (OPTIMIZE does).

Importing the package costs almost nothing: every job and ``txntable`` command starts a fresh
interpreter, and most of them (``--help``, ``--version``, the controller's own modules) never
touch the engine. The names below are loaded from their modules on first use (PEP 562), and so
is ``__version__`` (reading the installed distribution's metadata is itself slow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txntable.engine import (
        CommitOptions,
        CommitResult,
        ConcurrentModificationException,
        EngineError,
        Snapshot,
        Table,
        Transaction,
    )

    __version__: str

__all__ = [
    "CommitOptions",
    "CommitResult",
    "ConcurrentModificationException",
    "EngineError",
    "Snapshot",
    "Table",
    "Transaction",
]

#: public name -> where it is loaded from: the engine's public face
_LAZY = {
    "CommitOptions": "txntable.engine",
    "CommitResult": "txntable.engine",
    "Snapshot": "txntable.engine",
    "Table": "txntable.engine",
    "Transaction": "txntable.engine",
    "ConcurrentModificationException": "txntable.engine",
    "EngineError": "txntable.engine",
}


def _version() -> str:
    """One version source: the installed distribution (pyproject.toml); the chart is tested
    against it."""
    import importlib.metadata

    try:
        return importlib.metadata.version("txntable")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, "__version__"])
