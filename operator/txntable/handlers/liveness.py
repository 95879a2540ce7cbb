"""What the liveness probe checks beyond "the Kopf loop answers": no reconcile is stuck.

Kopf's liveness endpoint runs on the Kopf loop, so a blocked loop already fails the probe.
Reconciles run in Kopf's worker threads, though: one that hangs (a storage call that never
returns) leaves the loop free while that table is never observed again. Each reconcile is
registered here while it runs; the probe handler reports them and fails once one has run
longer than ``stuck_after`` seconds, so the kubelet restarts the controller. Pure and
thread-safe; no Kopf import (the driver registers each tick; the probe handler that exposes it
lives in ``kopf_startup``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Liveness:
    """Reconciles in flight (by table key, with their start time) and the last one finished."""

    stuck_after: float
    _in_flight: dict[str, float] = field(default_factory=dict)
    _finished: int = 0
    _last_finished: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, key: str, now: float) -> None:
        with self._lock:
            self._in_flight[key] = now

    def end(self, key: str, now: float) -> None:
        with self._lock:
            self._in_flight.pop(key, None)
            self._finished += 1
            self._last_finished = now

    def report(self, now: float) -> tuple[bool, dict[str, Any]]:
        """(alive, details): not alive when a reconcile has run longer than ``stuck_after``."""
        with self._lock:
            oldest_key, oldest = min(
                self._in_flight.items(), key=lambda kv: kv[1], default=("", now)
            )
            details: dict[str, Any] = {
                "reconcilesInFlight": len(self._in_flight),
                "reconcilesFinished": self._finished,
                "oldestReconcileSeconds": round(now - oldest, 3),
            }
            if self._last_finished is not None:
                details["lastReconcileSecondsAgo"] = round(now - self._last_finished, 3)
        alive = now - oldest <= self.stuck_after
        if not alive:
            details["stuck"] = f"the reconcile of {oldest_key} has run {now - oldest:.0f} s"
        return alive, details
