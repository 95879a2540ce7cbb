"""Engine commit metrics: Prometheus collectors implementing the engine's ``CommitObserver``.

Defined once, here, on a registry the caller passes (no module-level collectors: two processes'
worth of metrics in one test, or one controller exporting several registries, must not collide).
Names follow Prometheus conventions and the project's rules: prefix ``txntable_``, counters end in
``_total``, durations are ``_seconds`` histograms, labels are bounded (table name given by the
caller, operation, outcome, conflict type, isolation level) and never a path or a version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram

from txntable.engine import CommitEvent

if TYPE_CHECKING:
    from txntable.engine import CommitObserver

#: Bucket bounds for commit latency (seconds): a local commit takes milliseconds, a contended
#: object-store commit with many retries can take tens of seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Bucket bounds for the number of write attempts one commit needed.
ATTEMPT_BUCKETS = (1, 2, 3, 5, 10, 20, 50, 100, 1000)


class EngineMetrics:
    """The engine's commit metrics on ``registry`` (a fresh one when not given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "txntable_commit_attempts_total",
            "Writes of a commit file tried (first tries and retries).",
            ["table", "operation"],
            registry=r,
        )
        self.commits = Counter(
            "txntable_commits_total",
            "Commit calls by outcome: committed, conflict, retries_exceeded, invalid, error.",
            ["table", "operation", "outcome", "isolation_level"],
            registry=r,
        )
        self.conflicts = Counter(
            "txntable_commit_conflicts_total",
            "Commits that failed with a Delta conflict, by exception type.",
            ["table", "operation", "conflict_type", "isolation_level"],
            registry=r,
        )
        self.retries = Counter(
            "txntable_commit_retries_total",
            "Attempts that lost their version to another writer and were retried after the "
            "winning commits passed the conflict check.",
            ["table", "operation"],
            registry=r,
        )
        self.downgrades = Counter(
            "txntable_isolation_downgrades_total",
            "Commits that ran under SnapshotIsolation instead of the table's level "
            "(no data change: OPTIMIZE and the like).",
            ["table", "operation", "table_level"],
            registry=r,
        )
        self.attempts_per_commit = Histogram(
            "txntable_commit_attempts_per_commit",
            "Write attempts a finished commit call needed (1 = no contention).",
            ["table", "operation", "outcome"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "txntable_commit_duration_seconds",
            "Time from commit() to its end (validation, attempts, conflict checks), by outcome.",
            ["table", "operation", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    # -- CommitObserver ----------------------------------------------------------------------
    def on_attempt(self, event: CommitEvent, attempt: int) -> None:
        self.attempts.labels(event.table, event.operation).inc()

    def on_retry(self, event: CommitEvent, attempt: int, winners: int) -> None:
        self.retries.labels(event.table, event.operation).inc()

    def on_conflict(self, event: CommitEvent, conflict_type: str) -> None:
        self.conflicts.labels(
            event.table, event.operation, conflict_type, event.isolation_level
        ).inc()

    def on_isolation_downgrade(self, event: CommitEvent, table_level: str) -> None:
        self.downgrades.labels(event.table, event.operation, table_level).inc()

    def on_finished(
        self, event: CommitEvent, outcome: str, attempts: int, duration_s: float
    ) -> None:
        self.commits.labels(event.table, event.operation, outcome, event.isolation_level).inc()
        if attempts > 0:
            self.attempts_per_commit.labels(event.table, event.operation, outcome).observe(attempts)
        self.duration.labels(event.table, event.operation, outcome).observe(duration_s)


if TYPE_CHECKING:  # EngineMetrics must keep satisfying the engine's Protocol
    _CHECK: CommitObserver = EngineMetrics()
