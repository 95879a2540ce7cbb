"""Errors of the maintenance layer (planning and running OPTIMIZE), apart from the engine's.

Hierarchy::

    MaintenanceError                    base of everything raised here
    ├── InvalidPolicyError              a policy value cannot be used (also a ValueError)
    └── BinExecutionError               rewriting one bin failed (I/O, unreadable input file)

Engine errors (conflicts, storage, unsupported features) pass through unchanged; the
orchestrator catches the conflict errors it knows how to recover from and reports the rest.
"""

from __future__ import annotations


class MaintenanceError(Exception):
    """Base of every error raised by ``txntable.maintenance``."""


class InvalidPolicyError(MaintenanceError, ValueError):
    """An optimize policy (sizes, counts, Z-order columns) is not usable."""


class BinExecutionError(MaintenanceError):
    """A bin could not be rewritten; its inputs stay live and nothing of it is committed."""
