"""Tracking a table's runs each tick: what exists, what finished, what must wait.

``RunTracker.see`` is the first half of a tick: it observes the log (``controller.observe``),
lists the table's runs on its policies' backends (served by ``launch.run_cache`` in a cluster),
adopts each finished run once (``controller.run_records``: its record, Event and metrics), deletes
the runs past the history limits once they are recorded, holds a step a table feature stopped
(``controller.holds``) and finds the last VACUUM. ``RunTracker.retries`` then says, per run kind,
when the next attempt after a failed run may start (``launch.Backoff``, at least the policy's
cooldown; the count travels in the run names), and holds a compaction that ran out of memory
with all the policy allows (``launch.sizing.size``, which says so).

It lives apart from the tick (``controller.tick``) and from acting (``controller.act``)
because adoption is the densest logic of the controller and the one a restart, a lagging
status or a second replica tests hardest: it should be read on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from txntable.api import defaults as api_defaults
from txntable.api.conditions import Event, EventReason
from txntable.api.quantity import parse_bytes
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.config import Config
from txntable.controller.foresee import RunSizer
from txntable.controller.holds import Holds, protocol_of
from txntable.controller.observe import Observer
from txntable.controller.run_records import RunRecords, last_vacuum_time
from txntable.engine import Table
from txntable.launch import Backend, Backoff, Launcher, RunStatus, attempt_of, runs_to_delete
from txntable.launch.errors import LaunchError
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.reconcile.decide import ActiveRun, Retry
from txntable.reconcile.health import TableHealth
from txntable.reconcile.status import Failure

log = logging.getLogger(__name__)

DEFAULT_MIN_FILE_SIZE = parse_bytes(api_defaults.MIN_FILE_SIZE)


def run_backends(
    default: Backend, *policies: CompactionPolicy | CheckpointPolicy | None
) -> set[Backend]:
    """Where a table's runs can be: each of its policies' ``spec.spark.backend``, else the
    controller's default backend. A kind without a policy has no runs (only a policy starts
    one), so it adds nothing: listing the default backend for it asked the API, on every
    tick, for a kind of run no policy uses, and a cluster without that backend (the Spark
    Operator's CRD absent) answered 404 each time (issue 33.5)."""
    return {p.spec.spark.backend or default for p in policies if p is not None}


@dataclass(frozen=True, slots=True)
class Seen:
    """What one tick observed: the table's log and health (None: unreadable, ``failure`` says
    why), its runs, the last run of each kind and the last VACUUM."""

    engine_table: Table | None
    health: TableHealth | None
    failure: Failure | None
    runs: list[RunStatus]
    last_compaction: RunRecord | None
    last_checkpoint: RunRecord | None
    last_vacuum: RunRecord | None
    vacuum_time: datetime | None

    @property
    def active(self) -> tuple[ActiveRun, ...]:
        """The runs still in flight."""
        return tuple(
            ActiveRun(r.name, r.kind, r.started, r.waiting)
            for r in self.runs
            if not r.state.finished
        )

    def in_status(self, table: TxnTable) -> TxnTable:
        """``table`` with the last runs and VACUUM seen now in its status."""
        status = replace(
            table.status,
            last_compaction=self.last_compaction,
            last_checkpoint=self.last_checkpoint,
            last_vacuum=self.last_vacuum,
            last_vacuum_time=self.vacuum_time,
        )
        return replace(table, status=status)


@dataclass
class RunTracker:
    """What tracking runs needs: launchers, the observer and the per-table records."""

    config: Config
    launchers: Callable[[Backend], Launcher]
    observer: Observer
    records: RunRecords
    sizer: RunSizer
    holds: Holds
    backoff: Backoff
    metrics: ControllerMetrics | None = None

    def see(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        ckpt: CheckpointPolicy | None,
        storage_options: Mapping[str, str] | None,
        events: list[Event],
        *,
        failure: Failure | None = None,
    ) -> Seen:
        """Observe the table's log and follow its runs: its health, the runs of its policies'
        backends, the last run of each kind and the last VACUUM; export the table's metrics.
        With ``failure`` the log is not read (the table cannot be opened)."""
        key = table.metadata.key
        options = dict(table.spec.storage.options) | dict(storage_options or {})
        min_size = comp.spec.min_file_size if comp else DEFAULT_MIN_FILE_SIZE
        if failure is not None:
            engine_table, health = None, None
        else:
            engine_table, health, failure = self.observer.observe(key, table, options, min_size)
        runs, detail, prune = self._runs(table, comp, ckpt, events)
        stopped: list[tuple[RunKind, str]] = []
        last_c, last_k, last_v = self.records.adopt(
            table, runs, engine_table, events, detail=detail, unsupported=stopped
        )
        prune()
        if health is not None:
            for kind, message in stopped:
                self.holds.unsupported(key, kind, protocol_of(health), message)
        vacuum_time = last_vacuum_time(
            self.records.vacuum_time(key, table.status.last_vacuum_time),
            runs,
            compaction_vacuums=bool(comp and comp.spec.vacuum.enabled),
        )
        if health is not None and vacuum_time is not None:
            health = self.observer.unswept(key, health, comp, vacuum_time)
        if self.metrics is not None and health is not None and engine_table is not None:
            ns, name = table.metadata.namespace or "default", table.metadata.name
            self.metrics.observe_table(ns, name, health)
            self.metrics.observe_table_log(ns, name, engine_table, health.version)
        return Seen(engine_table, health, failure, runs, last_c, last_k, last_v, vacuum_time)

    def retries(
        self,
        key: str,
        comp: CompactionPolicy | None,
        seen: Seen,
        now: datetime,
        *,
        held: str | None,
    ) -> dict[RunKind, Retry]:
        """The back-off of each run kind whose last run failed; a compaction ``held`` (it ran
        out of memory with all the policy allows: ``launch.sizing.RunSize.held``) waits without
        end, until ``spec.spark.autoSize.maxExecutorMemory`` is raised past the ceiling that run
        was sized under."""
        cooldown = comp.spec.triggers.cooldown if comp else 0
        retries = {
            kind: retry
            for kind, record, floor in (
                (RunKind.OPTIMIZE, seen.last_compaction, cooldown),
                (RunKind.CHECKPOINT, seen.last_checkpoint, 0),
                (RunKind.VACUUM, seen.last_vacuum, cooldown),
            )
            if (retry := self._retry(key, kind, record, floor, now)) is not None
        }
        if comp is not None and held is not None:
            optimize = retries.get(RunKind.OPTIMIZE)
            retries[RunKind.OPTIMIZE] = Retry(optimize.attempt if optimize else 0, None, held)
        return retries

    def _retry(
        self, key: str, kind: RunKind, record: RunRecord | None, floor: float, now: datetime
    ) -> Retry | None:
        """The back-off after ``record`` when it failed: attempt n+1 after the n-th failure in
        a row (the count travels in the run names), not before the longer of the policy's
        cooldown (``floor``) and the back-off delay."""
        if record is None or record.outcome is not RunOutcome.FAILED:
            return None
        failures = attempt_of(record.run_name) + 1
        ended = record.completion_time or record.start_time or now
        wait = max(floor, self.backoff.delay(failures, f"{key}/{kind}"))
        why = f"run {record.run_name} failed"
        if failures > 1:
            why += f" ({failures} failures in a row)"
        return Retry(failures, ended + timedelta(seconds=wait), why)

    def _backends(self, *policies: CompactionPolicy | CheckpointPolicy | None) -> set[Backend]:
        return run_backends(Backend(self.config.default_backend), *policies)

    def _runs(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        ckpt: CheckpointPolicy | None,
        events: list[Event],
    ) -> tuple[list[RunStatus], Callable[[RunStatus], RunStatus], Callable[[], None]]:
        """The table's runs on its policies' backends; how to read one in detail (its result
        line, for the record made when it is first seen finished); and how to delete the runs
        past the history limits (after that record is made)."""
        ns = table.metadata.namespace or "default"
        runs: list[RunStatus] = []
        owners: dict[str, Launcher] = {}
        doomed: list[tuple[Launcher, RunStatus]] = []
        limits = [p for p in (comp, ckpt) if p is not None]
        for backend in sorted(self._backends(comp, ckpt)):
            launcher = self.launchers(backend)
            try:
                found = launcher.list_runs(ns, table.metadata.name)
            except LaunchError as exc:
                events.append(Event("Warning", EventReason.RUN_LIST_FAILED, str(exc)))
                continue
            found = self.sizer.detail(table.metadata.key, ns, launcher, found)
            found = [_with_waiting(launcher, ns, run) for run in found]
            runs.extend(found)
            owners.update((r.name, launcher) for r in found)
            if limits:
                doomed += [
                    (launcher, run)
                    for run in runs_to_delete(
                        found,
                        successful_limit=min(p.spec.successful_runs_history_limit for p in limits),
                        failed_limit=min(p.spec.failed_runs_history_limit for p in limits),
                    )
                ]

        def detail(run: RunStatus) -> RunStatus:
            owner = owners.get(run.name)
            if owner is None:
                return run
            try:
                return owner.status(ns, run.name)
            except LaunchError as exc:
                log.debug("no detail of run %s: %s", run.name, exc)
                return run

        def prune() -> None:
            for launcher, run in doomed:
                try:
                    launcher.delete(ns, run.name)
                except LaunchError as exc:
                    log.warning("could not delete old run %s: %s", run.name, exc)

        return runs, detail, prune


def _with_waiting(launcher: Launcher, namespace: str, run: RunStatus) -> RunStatus:
    """``run`` with why its pods cannot start, when it is in flight (one pod listing per run in
    flight: at most the concurrency limit's worth per tick)."""
    if run.state.finished:
        return run
    try:
        said = launcher.waiting(namespace, run.name)
    except LaunchError as exc:
        log.debug("no pods of run %s: %s", run.name, exc)
        return run
    return replace(run, waiting=said) if said else run
