"""Table maintenance: pure OPTIMIZE planning, Z-order keys, and the executors that run a plan.

Planning (``planner``, ``zorder``) is pure and cheap to import; the Spark executor is imported
only by the code that asks for it, so the controller can plan without a JVM.
"""

from txntable.maintenance.errors import BinExecutionError, InvalidPolicyError, MaintenanceError
from txntable.maintenance.planner import (
    Bin,
    OptimizePlan,
    OptimizePolicy,
    parse_size,
    plan_optimize,
)

__all__ = [
    "Bin",
    "BinExecutionError",
    "InvalidPolicyError",
    "MaintenanceError",
    "OptimizePlan",
    "OptimizePolicy",
    "parse_size",
    "plan_optimize",
]
