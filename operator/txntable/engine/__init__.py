"""The shared transaction engine: the Delta Lake log protocol, read and write.

Nothing here knows about Kubernetes, Kopf or Spark; every process that reads or commits a table
goes through this package.
"""

from txntable.engine.snapshot import Snapshot
from txntable.engine.table import Table
from txntable.engine.transaction import CommitOptions, CommitResult, Transaction

__all__ = ["CommitOptions", "CommitResult", "Snapshot", "Table", "Transaction"]
