"""The hook through which the commit path reports what happens, without knowing who listens.

The engine must not import Prometheus (or anything else that exports metrics), yet every attempt,
retry, conflict and downgrade must be counted. So the engine defines this small Protocol and calls
it; ``txntable.observability.metrics`` implements it. A listener that raises never fails a commit:
``notify`` logs and swallows its errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

#: Outcomes of one ``Transaction.commit`` call (a bounded label set).
COMMITTED = "committed"
CONFLICT = "conflict"
RETRIES_EXCEEDED = "retries_exceeded"
INVALID = "invalid"
ERROR = "error"
OUTCOMES = (COMMITTED, CONFLICT, RETRIES_EXCEEDED, INVALID, ERROR)


@dataclass(frozen=True, slots=True)
class CommitEvent:
    """Which commit an observation belongs to: bounded facts only (no paths, no versions)."""

    table: str
    operation: str
    isolation_level: str  # the level in use ("none" before it is known)


class CommitObserver(Protocol):
    """Receives the life of each commit; every method must be cheap and must not block."""

    def on_attempt(self, event: CommitEvent, attempt: int) -> None:
        """A write of the commit file is about to be tried (attempt counts from 1)."""

    def on_retry(self, event: CommitEvent, attempt: int, winners: int) -> None:
        """Attempt ``attempt`` lost its version; ``winners`` commits were checked, no conflict."""

    def on_conflict(self, event: CommitEvent, conflict_type: str) -> None:
        """The commit failed with a conflict (``conflict_type`` = the exception class name)."""

    def on_isolation_downgrade(self, event: CommitEvent, table_level: str) -> None:
        """The commit runs under SnapshotIsolation instead of the table's ``table_level``."""

    def on_finished(
        self, event: CommitEvent, outcome: str, attempts: int, duration_s: float
    ) -> None:
        """The commit call ended with ``outcome`` (one of ``OUTCOMES``) after ``attempts``."""


def notify(observer: CommitObserver | None, call: Callable[[CommitObserver], None]) -> None:
    """Run one observer call; a failing observer is logged, never propagated."""
    if observer is None:
        return
    try:
        call(observer)
    except Exception:
        log.exception("commit observer failed; the commit itself is unaffected")
