"""Observability: every Prometheus metric txntable exports, defined once (see docs/metrics.md).

The engine reports through its ``CommitObserver`` Protocol and never imports this package; the
processes that commit (CLI, Spark drivers, controller) create an ``EngineMetrics`` on the registry
they export and pass it in ``CommitOptions(observer=...)``.
"""

from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics

__all__ = ["ControllerMetrics", "EngineMetrics"]
