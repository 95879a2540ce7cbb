"""Errors of the maintenance layer (planning and running OPTIMIZE), apart from the engine's.

Hierarchy::

    MaintenanceError                    base of everything raised here
    ├── InvalidPolicyError              a policy value cannot be used (also a ValueError)
    ├── ClusteringError                 a clustered table's clustering columns cannot be used
    │                                   (malformed domain, nested, unknown or unorderable column)
    ├── BinExecutionError               rewriting one bin failed (I/O, unreadable input file)
    ├── SparkStartError                 the Spark session could not start (``bad_argument``:
    │   │                               Spark refused the master URL given)
    │   └── SparkJvmExitedError         its JVM exited before it was up (``lines``: what it
    │                                   said; turned into a SparkStartError with the reason)
    └── SparkJobError                   one of our Spark jobs failed (a task failed for good)

Both Spark errors' messages are one line (``spark_support.spark_error_line``), never the JVM's
stack trace.

Engine errors (conflicts, storage, unsupported features) pass through unchanged; the
orchestrator catches the conflict errors it knows how to recover from and reports the rest.
"""

from __future__ import annotations


class MaintenanceError(Exception):
    """Base of every error raised by ``txntable.maintenance``."""


class InvalidPolicyError(MaintenanceError, ValueError):
    """An optimize policy (sizes, counts, Z-order columns) is not usable."""


class ClusteringError(MaintenanceError):
    """The ``delta.clustering`` domain of a clustered table names columns OPTIMIZE cannot
    cluster by (or cannot be read); nothing is rewritten."""


class BinExecutionError(MaintenanceError):
    """A bin could not be rewritten; its inputs stay live and nothing of it is committed."""


class SparkStartError(MaintenanceError):
    """Spark could not start a session (no Java, a ``spark://`` master that does not answer);
    the message is Spark's reason on one line. ``bad_argument`` is True when Spark refused what
    it was given (a master URL it cannot parse), so a command line reports bad usage rather
    than a failed run."""

    def __init__(self, message: str, *, bad_argument: bool = False) -> None:
        super().__init__(message)
        self.bad_argument = bad_argument


class SparkJvmExitedError(SparkStartError):
    """PySpark's gateway JVM exited before it was up; ``lines`` is what it printed (the reason,
    among Spark's log lines), ``cause`` PySpark's error (which says only that it exited)."""

    def __init__(self, cause: BaseException, lines: list[str]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.lines = lines


class SparkJobError(MaintenanceError):
    """One of our Spark jobs failed once the session was up (a task failed for good, an
    executor was lost); the message says why in one line. A run that began may have committed
    part of its work, so it is a failed run, never refused input."""
