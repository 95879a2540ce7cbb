"""The controller's metrics: table health, commits seen in each log, maintenance runs, reconciles.

Defined once, here, on a registry the caller passes (docs/metrics.md lists every metric). The
controller calls ``observe_table`` and ``observe_table_log`` after each observation,
``observe_readiness`` and ``observe_failures`` after each reconcile of a table (from its new
status, so they hold after a restart too), ``run_finished`` when it records a finished run,
``reconcile_finished`` after every handler call. Labels are bounded: namespace and table (the
TxnTable resource's name, never a path), Ready's reason, run kind and outcome, operation (at
most ``MAX_OPERATIONS`` names), engine family. Nothing here imports the reconcile layer: health
arrives through the ``HealthLike`` Protocol.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from txntable.api.common import RunKind, RunOutcome
from txntable.engine import EngineError, Table
from txntable.observability.log_commits import ENGINES, OperationLabels, classify
from txntable.observability.metrics import LATENCY_BUCKETS
from txntable.observability.run_report import (
    RUN_OUTCOMES,
    kind_label,
    nonneg_int,
    parse_summary,
    run_outcome_label,
)
from txntable.observability.table_gauges import GaugeSpec, TableGauge, TableGaugeStore

log = logging.getLogger(__name__)

RECONCILE_OUTCOMES: Final = ("ok", "error")
#: run durations: seconds (inline checkpoints) to hours (large compactions)
RUN_BUCKETS: Final = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800)
#: at most this many commits are read from a log per observation (the rest are skipped)
MAX_LOG_COMMITS: Final = 1000
#: extra commits read per observation, for those that landed after it
LOG_SLACK: Final = 16


class HealthLike(Protocol):
    """The parts of ``txntable.reconcile.health.TableHealth`` exported as gauges."""

    @property
    def version(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def small_files(self) -> int: ...
    @property
    def small_file_bytes(self) -> int: ...
    @property
    def compactable_small_files(self) -> int: ...
    @property
    def partitions(self) -> int: ...
    @property
    def last_commit_time(self) -> datetime: ...
    @property
    def checkpoint_time(self) -> datetime | None: ...
    @property
    def commits_since_checkpoint(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    @property
    def maintainable(self) -> bool: ...
    @property
    def files_with_deletion_vectors(self) -> int: ...
    @property
    def deleted_rows(self) -> int: ...
    @property
    def reclaimable_bytes(self) -> int: ...


TABLE: Final = ("namespace", "table")
_RUN: Final = (*TABLE, "kind")

Collector = Counter | Gauge | Histogram


@dataclass(frozen=True, slots=True)
class Metric:
    """One collector of the controller: the ``ControllerMetrics`` attribute that holds it, its
    class, name, help text, labels and (histograms) buckets."""

    attr: str
    cls: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    doc: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None

    @property
    def per_table(self) -> bool:
        """Labelled by namespace and table first: dropped with the table (``forget_table``)."""
        return self.labels[: len(TABLE)] == TABLE

    @property
    def table_gauge(self) -> bool:
        """A per-table gauge: kept in the ``TableGaugeStore`` rather than as a
        ``prometheus_client`` child per table (``observability.table_gauges``)."""
        return self.cls is Gauge and self.per_table

    def build(self, registry: CollectorRegistry) -> Collector:
        if self.buckets is not None:
            return Histogram(
                self.name, self.doc, self.labels, buckets=self.buckets, registry=registry
            )
        return self.cls(self.name, self.doc, self.labels, registry=registry)


#: Every collector, declared once (docs/metrics.md lists them all); ``ControllerMetrics`` has
#: one attribute per row, and the series ``forget_table`` drops follow from the labels.
METRICS: Final[tuple[Metric, ...]] = (
    # the controller process
    Metric("start_time", Gauge, "txntable_controller_start_time_seconds",
           "Unix time the controller process started (present while it is up)."),
    # table health, from each observation (observe_table)
    Metric("version", Gauge, "txntable_table_version", "Latest version in the table's log.",
           TABLE),
    Metric("files", Gauge, "txntable_table_files", "Live data files.", TABLE),
    Metric("bytes", Gauge, "txntable_table_bytes", "Bytes in live data files.", TABLE),
    Metric("small_files", Gauge, "txntable_table_small_files",
           "Live files below the policy's minimum size.", TABLE),
    Metric("small_bytes", Gauge, "txntable_table_small_file_bytes", "Bytes in small files.",
           TABLE),
    Metric("compactable", Gauge, "txntable_table_compactable_small_files",
           "Small files sharing a partition with another small file (compaction can merge).",
           TABLE),
    Metric("partitions", Gauge, "txntable_table_partitions",
           "Distinct partitions among live files.", TABLE),
    Metric("dv_files", Gauge, "txntable_table_files_with_deletion_vectors",
           "Live files carrying a deletion vector.", TABLE),
    Metric("deleted_rows", Gauge, "txntable_table_deleted_rows",
           "Rows the deletion vectors of live files delete (still on disk).", TABLE),
    Metric("reclaimable", Gauge, "txntable_table_vacuum_reclaimable_bytes",
           "Bytes of removed files older than the table's deletedFileRetentionDuration "
           "(what VACUUM would delete; a lower bound).", TABLE),
    Metric("since_checkpoint", Gauge, "txntable_table_commits_since_checkpoint",
           "Commits after the newest checkpoint (all if none).", TABLE),
    Metric("last_commit", Gauge, "txntable_table_last_commit_timestamp_seconds",
           "Unix time of the newest commit.", TABLE),
    Metric("last_checkpoint", Gauge, "txntable_table_last_checkpoint_timestamp_seconds",
           "Unix time the newest checkpoint was written (absent when there is none).", TABLE),
    Metric("writable", Gauge, "txntable_table_writable",
           "1 when OPTIMIZE can rewrite the table's files (its protocol allows a rewrite).", TABLE),
    Metric("maintainable", Gauge, "txntable_table_maintainable",
           "1 when checkpoints, log cleanup and VACUUM can run (every feature is known).", TABLE),
    Metric("observed", Gauge, "txntable_table_observed_timestamp_seconds",
           "Unix time of the last observation.", TABLE),
    Metric("observe_interval", Gauge, "txntable_table_observe_interval_seconds",
           "How often the table is observed (its spec.observeInterval).", TABLE),
    Metric("ready", Gauge, "txntable_table_ready",
           "1 when the table's Ready condition is True, else 0; reason is Ready's reason "
           "(docs/operations.md, the table of phases).", (*TABLE, "reason")),
    Metric("conflict_backoff", Gauge, "txntable_table_conflict_backoff_seconds",
           "Seconds until the next compaction run may start because our recent runs kept "
           "conflicting with other writers (0: no back-off; spec.avoidRecentWrites.backOff).",
           TABLE),
    Metric("event_driven", Gauge, "txntable_table_event_driven",
           "1 when the table's commits wake its observation, 0 when it is polled.", TABLE),
    # commits seen in the table's log (observe_log_commits)
    Metric("log_commits", Counter, "txntable_log_commits_total",
           "Commits seen landing in the table's log, by operation, engine family and whether "
           "the writer lost attempts first (first_attempt, retried, unknown).",
           (*TABLE, "operation", "engine", "outcome")),
    Metric("log_retries", Counter, "txntable_log_commit_retries_total",
           "Write attempts that commits seen in the log lost to other writers before landing "
           "(exact for txntable and delta-rs, at least one per late commit for other engines).",
           (*TABLE, "engine")),
    # maintenance runs (run_finished)
    Metric("runs", Counter, "txntable_maintenance_runs_total",
           "Finished maintenance runs by kind and outcome.", (*_RUN, "outcome")),
    Metric("run_duration", Histogram, "txntable_maintenance_run_duration_seconds",
           "Duration of finished maintenance runs.", _RUN, RUN_BUCKETS),
    Metric("last_success", Gauge, "txntable_maintenance_last_success_timestamp_seconds",
           "Unix time the last successful (or nothing-to-do) run of this kind was recorded.",
           _RUN),
    Metric("failure_streak", Gauge, "txntable_maintenance_consecutive_failures",
           "Runs of this kind that ended failed or conflicted since the last success (reset "
           "by a succeeded or nothing-to-do run). Failures in a row are read back from the "
           "table's status at every reconcile, so the count survives a controller restart and "
           "stays while the table is held.", _RUN),
    Metric("partial_runs", Counter, "txntable_maintenance_partial_runs_total",
           "Runs that failed after committing part of their work (e.g. the compaction committed, "
           "then its VACUUM was refused); also counted as failed in "
           "txntable_maintenance_runs_total.", _RUN),
    Metric("files_removed", Counter, "txntable_maintenance_files_removed_total",
           "Files runs removed (rewritten).", _RUN),
    Metric("files_added", Counter, "txntable_maintenance_files_added_total",
           "Files runs added.", _RUN),
    Metric("bytes_removed", Counter, "txntable_maintenance_bytes_removed_total",
           "Bytes of files runs removed.", _RUN),
    Metric("bytes_added", Counter, "txntable_maintenance_bytes_added_total",
           "Bytes of files runs added.", _RUN),
    Metric("bytes_dropped", Counter, "txntable_maintenance_bytes_dropped_total",
           "Input bytes of bins runs rewrote but did not commit (other writers changed their "
           "inputs first): wasted work.", _RUN),
    Metric("partitions_deferred", Counter, "txntable_maintenance_partitions_deferred_total",
           "Partitions with work that conflict-aware planning left alone because other "
           "writers changed them recently.", _RUN),
    Metric("vacuum_files", Counter, "txntable_vacuum_files_deleted_total",
           "Files VACUUM deleted at the end of runs (data files and deletion vectors).", _RUN),
    Metric("vacuum_bytes", Counter, "txntable_vacuum_bytes_deleted_total",
           "Bytes of the files VACUUM deleted at the end of runs.", _RUN),
    Metric("run_attempts", Counter, "txntable_run_commit_attempts_total",
           "Commit attempts made by maintenance runs (from their result's engineMetrics).",
           _RUN),
    Metric("run_retries", Counter, "txntable_run_commit_retries_total",
           "Commit attempts of maintenance runs lost to another writer and retried.", _RUN),
    Metric("run_commits", Counter, "txntable_run_commits_total",
           "Commit calls of maintenance runs by engine outcome.", (*_RUN, "outcome")),
    Metric("run_conflicts", Counter, "txntable_run_commit_conflicts_total",
           "Commits of maintenance runs that failed with a Delta conflict, by type.",
           (*_RUN, "conflict_type")),
    # reconcile handlers and commit events (reconcile_finished, commit_event)
    Metric("reconciles", Counter, "txntable_reconciles_total",
           "Reconcile handler calls by kind and outcome (ok, error).", ("kind", "outcome")),
    Metric("reconcile_duration", Histogram, "txntable_reconcile_duration_seconds",
           "Time one reconcile handler call took.", ("kind",), LATENCY_BUCKETS),
    Metric("commit_events", Counter, "txntable_commit_events_total",
           "Commits announced by an event source (LogProbe, SQS) before the debounce.",
           ("source",)),
    Metric("last_reconcile", Gauge, "txntable_last_reconcile_timestamp_seconds",
           "Unix time the last reconcile finished without error."),
    Metric("shards_held", Gauge, "txntable_controller_shards_held",
           "Shards of the tables this replica holds and maintains (0 without TXNTABLE_SHARDS)."),
)  # fmt: skip


class ControllerMetrics:
    """The controller's collectors on ``registry`` (a fresh one when not given): one
    attribute per row of ``METRICS``."""

    start_time: Gauge
    version: TableGauge
    files: TableGauge
    bytes: TableGauge
    small_files: TableGauge
    small_bytes: TableGauge
    compactable: TableGauge
    partitions: TableGauge
    dv_files: TableGauge
    deleted_rows: TableGauge
    reclaimable: TableGauge
    since_checkpoint: TableGauge
    last_commit: TableGauge
    last_checkpoint: TableGauge
    writable: TableGauge
    maintainable: TableGauge
    observed: TableGauge
    observe_interval: TableGauge
    ready: TableGauge
    conflict_backoff: TableGauge
    event_driven: TableGauge
    log_commits: Counter
    log_retries: Counter
    runs: Counter
    run_duration: Histogram
    last_success: TableGauge
    failure_streak: TableGauge
    partial_runs: Counter
    files_removed: Counter
    files_added: Counter
    bytes_removed: Counter
    bytes_added: Counter
    bytes_dropped: Counter
    partitions_deferred: Counter
    vacuum_files: Counter
    vacuum_bytes: Counter
    run_attempts: Counter
    run_retries: Counter
    run_commits: Counter
    run_conflicts: Counter
    reconciles: Counter
    reconcile_duration: Histogram
    commit_events: Counter
    last_reconcile: Gauge
    shards_held: Gauge

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._table_gauges = TableGaugeStore(
            [GaugeSpec(m.name, m.doc, m.labels) for m in METRICS if m.table_gauge]
        )
        self._table_gauges.register(self.registry)
        for metric in METRICS:
            if metric.table_gauge:
                setattr(self, metric.attr, self._table_gauges.gauge(metric.name))
            else:
                setattr(self, metric.attr, metric.build(self.registry))
        self._per_table: list[Collector] = [
            getattr(self, m.attr) for m in METRICS if m.per_table and not m.table_gauge
        ]
        self._operations = OperationLabels()
        self._log_position: dict[tuple[str, str], int] = {}
        self._streaks: dict[tuple[str, str, str], int] = {}
        self._ready_reason: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self.start_time.set(time.time())

    # -- table health ----------------------------------------------------------------------
    def observe_table(self, namespace: str, name: str, health: HealthLike) -> None:
        """Set the table's gauges from one observation."""
        labels = (namespace, name)
        self.version.labels(*labels).set(health.version)
        self.files.labels(*labels).set(health.files)
        self.bytes.labels(*labels).set(health.size_bytes)
        self.small_files.labels(*labels).set(health.small_files)
        self.small_bytes.labels(*labels).set(health.small_file_bytes)
        self.compactable.labels(*labels).set(health.compactable_small_files)
        self.partitions.labels(*labels).set(health.partitions)
        self.dv_files.labels(*labels).set(health.files_with_deletion_vectors)
        self.deleted_rows.labels(*labels).set(health.deleted_rows)
        self.reclaimable.labels(*labels).set(health.reclaimable_bytes)
        self.since_checkpoint.labels(*labels).set(health.commits_since_checkpoint)
        self.last_commit.labels(*labels).set(health.last_commit_time.timestamp())
        if health.checkpoint_time is not None:
            self.last_checkpoint.labels(*labels).set(health.checkpoint_time.timestamp())
        else:
            with contextlib.suppress(KeyError):
                self.last_checkpoint.remove(*labels)
        self.writable.labels(*labels).set(1 if health.writable else 0)
        self.maintainable.labels(*labels).set(1 if health.maintainable else 0)
        self.observed.labels(*labels).set(time.time())

    def observe_readiness(
        self, namespace: str, name: str, ready: bool, reason: str, observe_interval: float
    ) -> None:
        """Export the table's Ready condition (one series, labelled by its reason) and how
        often it is observed, for the alerts on tables that stay not ready or unobserved."""
        key = (namespace, name)
        with self._lock:
            before = self._ready_reason.get(key)
            self._ready_reason[key] = reason
        if before is not None and before != reason:
            with contextlib.suppress(KeyError):
                self.ready.remove(namespace, name, before)
        self.ready.labels(namespace, name, reason).set(1 if ready else 0)
        self.observe_interval.labels(namespace, name).set(observe_interval)

    def observe_failures(self, namespace: str, name: str, in_a_row: Mapping[RunKind, int]) -> None:
        """Raise ``txntable_maintenance_consecutive_failures`` to at least the failures in a
        row the table's status shows per kind (``in_a_row``; 0 creates the series): after a
        restart, or for a table held after runs out of memory, the gauge says what status says
        instead of being absent. A count this process kept (conflicted runs too) is never
        lowered here; a succeeded run resets it (``run_finished``)."""
        for kind, count in in_a_row.items():
            k = (namespace, name, kind_label(kind))
            with self._lock:
                value = self._streaks[k] = max(self._streaks.get(k, 0), count)
            self.failure_streak.labels(*k).set(value)

    def observe_conflict_backoff(self, namespace: str, name: str, seconds: float) -> None:
        """Set how long the conflict back-off still holds the table's compaction (0: none)."""
        self.conflict_backoff.labels(namespace, name).set(max(0.0, seconds))

    # -- commits in the log ----------------------------------------------------------------
    def observe_log_commits(
        self, namespace: str, name: str, commit_infos: Iterable[Mapping[str, Any]]
    ) -> int:
        """Count commits of the log not counted before (each dict a commitInfo with its
        ``version``, as ``Table.history`` gives); returns how many were counted."""
        key = (namespace, name)
        counted = 0
        with self._lock:
            position = self._log_position.get(key, -1)
            newest = position
            for info in sorted(
                (c for c in (classify(i) for i in commit_infos) if c is not None),
                key=lambda c: c.version,
            ):
                if info.version <= newest:
                    continue
                newest = info.version
                operation = self._operations(info.operation)
                self.log_commits.labels(namespace, name, operation, info.engine, info.outcome).inc()
                retries = self.log_retries.labels(namespace, name, info.engine)
                retries.inc(info.lost_attempts)  # inc(0) still creates the series at 0
                counted += 1
            self._log_position[key] = newest
        return counted

    def observe_table_log(
        self, namespace: str, name: str, table: Table, version: int, *, limit: int = MAX_LOG_COMMITS
    ) -> int:
        """Read and count the commits after the last counted one, up to ``version``.

        The first call for a table only records ``version`` as the starting point: counting a
        log's whole history after every controller restart would show as a burst of commits.
        At most ``limit`` newest commits are read per call (older ones of a larger burst are
        not counted); a failing read is logged and counts nothing (the next call catches up).
        """
        key = (namespace, name)
        with self._lock:
            position = self._log_position.get(key)
            if position is None or version < position:  # first sight, or the table was replaced
                self._log_position[key] = version
                return 0
        if version == position:
            return 0
        window = min(version - position + LOG_SLACK, limit)
        try:  # newest first; commits that landed since the observation are counted too
            infos = table.history(limit=window)
        except EngineError as exc:
            log.warning("could not read the log of %s/%s for metrics: %s", namespace, name, exc)
            return 0
        return self.observe_log_commits(namespace, name, infos)

    # -- maintenance runs ------------------------------------------------------------------
    def run_finished(
        self,
        namespace: str,
        name: str,
        kind: RunKind | None,
        outcome: RunOutcome,
        *,
        seconds: float | None = None,
        result: Mapping[str, Any] | None = None,
        partial: bool = False,
    ) -> None:
        """Record a finished run: outcome, duration, files/bytes rewritten and the engine
        counters of its result line (``engineMetrics``), when it has them; ``partial``: it
        failed after committing part of its work."""
        k = (namespace, name, kind_label(kind))
        label = run_outcome_label(outcome)
        for each in RUN_OUTCOMES:  # every outcome exists from the first run: increase() works
            self.runs.labels(*k, each)
        self.runs.labels(*k, label).inc()
        self.partial_runs.labels(*k).inc(1 if partial else 0)
        streak = None
        with self._lock:
            if label in ("succeeded", "nothing_to_do"):
                streak = self._streaks[k] = 0
            elif label in ("failed", "conflicted"):
                streak = self._streaks[k] = self._streaks.get(k, 0) + 1
        if label in ("succeeded", "nothing_to_do"):
            self.last_success.labels(*k).set(time.time())
        if streak is not None:
            self.failure_streak.labels(*k).set(streak)
        if seconds is not None and seconds >= 0:
            self.run_duration.labels(*k).observe(seconds)
        result = result or {}
        for counter, field in (
            (self.files_removed, "numFilesRemoved"),
            (self.files_added, "numFilesAdded"),
            (self.bytes_removed, "numBytesRemoved"),
            (self.bytes_added, "numBytesAdded"),
            (self.bytes_dropped, "numBytesDropped"),
        ):
            value = nonneg_int(result.get(field))
            if value is not None:
                counter.labels(*k).inc(value)
        deferred = result.get("deferredPartitions")
        if isinstance(deferred, list):
            self.partitions_deferred.labels(*k).inc(len(deferred))
        vacuumed = result.get("vacuum")
        if isinstance(vacuumed, Mapping) and not vacuumed.get("dryRun"):
            for counter, field in ((self.vacuum_files, "numDeleted"), (self.vacuum_bytes, "bytes")):
                value = nonneg_int(vacuumed.get(field))
                if value is not None:
                    counter.labels(*k).inc(value)
        summary = parse_summary(result)
        if summary is None:
            return
        self.run_attempts.labels(*k).inc(summary["attempts"])
        self.run_retries.labels(*k).inc(summary["retries"])
        for engine_outcome, n in summary["commits"].items():
            self.run_commits.labels(*k, engine_outcome).inc(n)
        for conflict_type, n in summary["conflicts"].items():
            self.run_conflicts.labels(*k, conflict_type).inc(n)

    # -- reconciles --------------------------------------------------------------------------
    def reconcile_finished(self, kind: str, seconds: float, error: bool) -> None:
        """One handler call ended (``kind``: a constant naming the handler, e.g. ``table``)."""
        for each in RECONCILE_OUTCOMES:  # both series exist from the first call
            self.reconciles.labels(kind, each)
        self.reconciles.labels(kind, RECONCILE_OUTCOMES[1 if error else 0]).inc()
        self.reconcile_duration.labels(kind).observe(max(seconds, 0.0))
        if not error:
            self.last_reconcile.set(time.time())

    @contextlib.contextmanager
    def timed(self, kind: str) -> Iterator[None]:
        """``with metrics.timed("table"): ...`` calls ``reconcile_finished`` when the block
        ends (``error`` when it raised; the exception propagates)."""
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.reconcile_finished(kind, time.monotonic() - started, error=True)
            raise
        self.reconcile_finished(kind, time.monotonic() - started, error=False)

    def commit_event(self, source: Any) -> None:
        """An event source announced a commit (``source``: an ``EventSource`` or its name)."""
        self.commit_events.labels(str(getattr(source, "value", source))).inc()

    def observation_mode(self, namespace: str, name: str, observation: Any) -> None:
        """Whether the table is event-driven (``observation.mode == "Events"``) or polled."""
        mode = getattr(getattr(observation, "mode", None), "value", None)
        self.event_driven.labels(namespace, name).set(1 if mode == "Events" else 0)

    def forget_table(self, namespace: str, name: str) -> None:
        """Drop every series of a deleted table."""
        with self._lock:
            self._log_position.pop((namespace, name), None)
            self._ready_reason.pop((namespace, name), None)
            for k in [k for k in self._streaks if k[:2] == (namespace, name)]:
                del self._streaks[k]
        self._table_gauges.forget((namespace, name))
        for metric in self._per_table:
            _remove(metric, (namespace, name))


def _remove(metric: Counter | Gauge | Histogram, prefix: tuple[str, ...]) -> None:
    """Remove the children of ``metric`` whose first label values are ``prefix``."""
    names = metric._labelnames  # prometheus_client has no removal by label prefix
    wanted = dict(zip(names, prefix, strict=False))
    seen: set[tuple[str, ...]] = set()
    for family in metric.collect():
        for sample in family.samples:
            if all(sample.labels.get(n) == v for n, v in wanted.items()):
                seen.add(tuple(sample.labels[n] for n in names))
    for values in seen:
        with contextlib.suppress(KeyError):
            metric.remove(*values)


__all__ = ["ENGINES", "ControllerMetrics", "HealthLike", "kind_label", "run_outcome_label"]
