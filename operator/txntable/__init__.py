"""txntable: keep lakehouse (Delta Lake) tables healthy on Kubernetes.

The public Python surface is small: ``Table`` opens a Delta table and gives ``Snapshot``s.
"""

from txntable.engine import Snapshot, Table
from txntable.engine.errors import EngineError

__all__ = ["EngineError", "Snapshot", "Table"]
__version__ = "0.1.0"
