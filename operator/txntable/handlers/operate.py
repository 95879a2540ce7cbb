"""One reconcile of one table, with the I/O: observe the log, follow runs, decide, act.

The Kopf handlers and the local mode (``txntable run --local``) both call ``Operator.reconcile``,
so the cluster and the laptop run the same logic; only where manifests come from and where status
goes differ. Nothing in this module imports Kopf. Observation keeps a compact
``engine.read.summary.TableSummary`` per resource, never a snapshot (a few bytes per file; one
listing plus the new commits per tick); decisions are the pure functions of ``txntable.reconcile``;
runs go through a ``launch.Launcher``; small checkpoints are written inline, from a snapshot loaded
for that checkpoint only.

A finished run is adopted once: its record, its ``Run<Outcome>`` Event (with the reason the
backend gives) and its metrics are produced the first time the run is seen finished, never
again (idempotent by run name, in memory and through the status). After a failure the next
launch waits for the back-off (``launch.Backoff``, at least the policy's cooldown) and is the
next attempt, with a new run name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from txntable.api import defaults as api_defaults
from txntable.api.conditions import EventReason, Reason
from txntable.api.quantity import parse_bytes
from txntable.api.table import PlanResources, PlanStatus
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
    TxnTableStatus,
)
from txntable.config import Config
from txntable.engine import CommitOptions, Snapshot, Table
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import (
    CorruptLogError,
    EngineError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from txntable.engine.model.schema import to_arrow_type
from txntable.engine.read.summary import TableSummary
from txntable.engine.storage.base import Storage
from txntable.handlers.foresight import Conflicts, Foresight
from txntable.handlers.requests import checkpoint_request, compaction_request, vacuum_request
from txntable.handlers.run_sizing import RunSizer, running_note
from txntable.launch import (
    Backend,
    Backoff,
    Launcher,
    RunState,
    RunStatus,
    attempt_of,
    runs_to_delete,
)
from txntable.launch.errors import LaunchError, PermanentLaunchError
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.observability.run_report import planning_note
from txntable.reconcile.decide import (
    ActiveRun,
    Decision,
    Placement,
    Retry,
    Work,
    decide_checkpoint,
    decide_compaction,
    decide_vacuum,
    outcome_of,
    vacuumed,
)
from txntable.reconcile.health import TableHealth, observe_summary, swept_before, without_swept
from txntable.reconcile.plan import CompactionPlan, plan_status
from txntable.reconcile.resolve import resolve
from txntable.reconcile.status import Failure, Outcome, table_status

log = logging.getLogger(__name__)

DEFAULT_MIN_FILE_SIZE = parse_bytes(api_defaults.MIN_FILE_SIZE)
#: Finished runs remembered per table (so each is recorded once); older names are forgotten.
RECORDED_RUNS_KEPT = 16
#: Full table loads (a first observation, or a summary that cannot be advanced) at once: each
#: peaks at ~140 MB above the summary it leaves for a 100,000-file table, and Kopf runs several
#: reconciles in threads, so a controller starting with many big tables would add them up.
FULL_LOADS_AT_ONCE = 2


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event to post on the table (type Normal/Warning, CamelCase reason)."""

    type: str
    reason: EventReason
    message: str


@dataclass(frozen=True, slots=True)
class Tick:
    """What one reconcile produced: the next status and the events to post."""

    status: TxnTableStatus
    events: tuple[Event, ...]
    launched: tuple[str, ...]
    active_runs: int


@dataclass(frozen=True, slots=True)
class _Seen:
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
            ActiveRun(r.name, r.kind, r.started) for r in self.runs if not r.state.finished
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


@dataclass(slots=True)
class _Acts:
    """What one tick decided and started; ``work`` counts the runs started so far, so each
    decision sees those before it."""

    work: Work
    last_compaction: RunRecord | None
    last_checkpoint: RunRecord | None
    last_vacuum: RunRecord | None
    compaction: Decision | None = None
    vacuum: Decision | None = None
    checkpoint: Decision | None = None
    launched: list[str] = field(default_factory=list)

    def started(self, table: TxnTable, name: str, kind: RunKind, version: int) -> RunRecord:
        """Count the run ``name`` as in flight; return its record."""
        now = self.work.now
        self.work = replace(
            self.work,
            active=(*self.work.active, ActiveRun(name, kind, now)),
            active_total=self.work.active_total + 1,
        )
        self.launched.append(name)
        return RunRecord(
            run_name=name,
            table=table.metadata.name,
            outcome=RunOutcome.RUNNING,
            start_time=now.replace(microsecond=0),
            version=version,
        )


@dataclass
class Operator:
    """Long-lived controller state: configuration, launchers and the table cache."""

    config: Config
    launchers: Callable[[Backend], Launcher]
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    metrics: ControllerMetrics | None = None
    engine_metrics: EngineMetrics | None = None
    #: Retry delays after consecutive failed runs (the policy's cooldown is the floor).
    backoff: Backoff = field(default_factory=Backoff)
    #: Per table: its handle (holding no snapshot) and the summary of its log.
    _tables: dict[str, Table] = field(default_factory=dict)
    _summaries: dict[str, TableSummary] = field(default_factory=dict)
    _full_loads: threading.Semaphore = field(
        default_factory=lambda: threading.Semaphore(FULL_LOADS_AT_ONCE)
    )
    #: Per table: the record made for each finished run already adopted, by run name.
    _recorded: dict[str, dict[str, RunRecord]] = field(default_factory=dict)
    #: Per table: the next compaction run's plan and the throughput it is estimated from.
    foresight: Foresight = field(default_factory=Foresight)
    #: Per table: what sizes its compaction runs (peaks seen, the newest finished run, OOMs).
    sizer: RunSizer = field(default_factory=RunSizer)

    # -- observation --------------------------------------------------------------------
    def _open(self, key: str, table: TxnTable, options: Mapping[str, str]) -> Table:
        cached = self._tables.get(key)
        if cached is not None:
            return cached
        try:
            opened = Table.open(table.spec.location, options)
        except TableNotFoundError:
            create = table.spec.create
            if create is None:
                raise
            import pyarrow as pa

            schema = pa.schema(
                [pa.field(c.name, to_arrow_type(c.type), c.nullable) for c in create.columns]
            )
            ns = table.metadata.namespace or "default"
            opened = Table.create(
                table.spec.location,
                schema,
                create.partition_columns,
                dict(create.properties),
                storage_options=options,
                name=table.metadata.name,
                options=CommitOptions(
                    table_name=f"{ns}/{table.metadata.name}", observer=self.engine_metrics
                ),
            )
            log.info("created table", extra={"table": table.metadata.name})
            opened = Table(opened.storage)  # without the snapshot creating it left behind
        self._tables[key] = opened
        return opened

    def forget(self, key: str) -> None:
        """Drop the cached table of a deleted resource."""
        self._tables.pop(key, None)
        self._summaries.pop(key, None)
        self._recorded.pop(key, None)
        self.foresight.forget(key)
        self.sizer.forget(key)

    def _load_summary(self, storage: Storage) -> TableSummary:
        with self._full_loads:
            return TableSummary.load(storage)

    def _observe(
        self, key: str, table: TxnTable, options: Mapping[str, str], min_file_size: int
    ) -> tuple[Table | None, TableHealth | None, Failure | None]:
        try:
            engine_table = self._open(key, table, options)
            known = self._summaries.get(key)
            summary = (
                known.advance(engine_table.storage, reload=self._load_summary)
                if known is not None
                else self._load_summary(engine_table.storage)
            )
            self._summaries[key] = summary
        except TableNotFoundError as exc:
            return None, None, Failure(Reason.TABLE_NOT_FOUND, str(exc))
        except StorageError as exc:
            self.forget(key)
            return None, None, Failure(Reason.STORAGE_UNREACHABLE, str(exc))
        except UnsupportedFeatureError as exc:
            return None, None, Failure(Reason.UNSUPPORTED_PROTOCOL, str(exc))
        except CorruptLogError as exc:
            self.forget(key)
            return None, None, Failure(Reason.CORRUPT_LOG, str(exc))
        except EngineError as exc:
            return None, None, Failure(Reason.STORAGE_UNREACHABLE, str(exc))
        return engine_table, observe_summary(summary, min_file_size), None

    def _unswept(
        self,
        key: str,
        health: TableHealth,
        policy: CompactionPolicy | None,
        vacuum_time: datetime,
    ) -> TableHealth:
        """``health`` without the bytes the VACUUM begun at ``vacuum_time`` deleted (their
        tombstones stay in the log until a checkpoint). A dry-run policy deleted nothing."""
        vacuum = policy.spec.vacuum if policy is not None else None
        summary = self._summaries.get(key)
        if summary is None or (vacuum is not None and vacuum.dry_run):
            return health
        retention = vacuum.retention if vacuum is not None else None
        cutoff = swept_before(health.file_retention_ms, retention, vacuum_time)
        return health if cutoff is None else without_swept(health, summary, cutoff)

    # -- the tick ------------------------------------------------------------------------
    def reconcile(
        self,
        table: TxnTable,
        compaction_policies: Sequence[CompactionPolicy],
        checkpoint_policies: Sequence[CheckpointPolicy],
        *,
        storage_options: Mapping[str, str] | None = None,
        active_total: int = 0,
    ) -> Tick:
        """Observe ``table``, follow its runs, decide and act; return the next status."""
        now = self.clock()
        comp = resolve(table, compaction_policies, "compaction")
        ckpt = resolve(table, checkpoint_policies, "checkpoint")
        events: list[Event] = []
        seen = self._see(table, comp.policy, ckpt.policy, storage_options, events)
        table = seen.in_status(table)  # decide on what this tick learned, not on the last status
        plan, conflicts = self._foresee(table, comp.policy, seen, now)
        work = Work(
            now,
            seen.active,
            max(active_total, len(seen.active)),
            self.config.max_concurrent_runs,
            self._retries(table.metadata.key, comp.policy, seen, now),
            conflicts=conflicts.hold,
            plan_id=plan.plan_id if plan else None,
        )
        acts = _Acts(work, seen.last_compaction, seen.last_checkpoint, seen.last_vacuum)
        if seen.health is not None and seen.engine_table is not None:
            if comp.policy is not None:
                self._compact_and_vacuum(table, comp.policy, seen.health, acts, events)
            if ckpt.policy is not None:
                self._checkpoint(
                    table, ckpt.policy, seen.health, seen.engine_table, acts=acts, events=events
                )
        outcome = Outcome(
            now=now,
            health=seen.health,
            failure=seen.failure,
            compaction=comp,
            checkpoint=ckpt,
            compaction_decision=acts.compaction,
            checkpoint_decision=acts.checkpoint,
            active=acts.work.active,
            last_compaction=acts.last_compaction,
            last_checkpoint=acts.last_checkpoint,
            vacuum_decision=acts.vacuum,
            last_vacuum=acts.last_vacuum,
            last_vacuum_time=seen.vacuum_time,
            plan=self._plan_status(table, comp.policy, plan),
            conflicts=conflicts.status,
        )
        status = table_status(table, outcome)
        return Tick(status, tuple(events), tuple(acts.launched), len(acts.work.active))

    def _see(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        ckpt: CheckpointPolicy | None,
        storage_options: Mapping[str, str] | None,
        events: list[Event],
    ) -> _Seen:
        """Observe the table's log and follow its runs: its health, the runs of its policies'
        backends, the last run of each kind and the last VACUUM; export the table's metrics."""
        key = table.metadata.key
        options = dict(table.spec.storage.options) | dict(storage_options or {})
        min_size = comp.spec.min_file_size if comp else DEFAULT_MIN_FILE_SIZE
        engine_table, health, failure = self._observe(key, table, options, min_size)
        runs = self._runs(table, comp, ckpt, events)
        last_c, last_k, last_v = self._records(key, table, runs, engine_table, events)
        vacuum_time = _last_vacuum_time(
            table.status.last_vacuum_time,
            runs,
            compaction_vacuums=bool(comp and comp.spec.vacuum.enabled),
        )
        if health is not None and vacuum_time is not None:
            health = self._unswept(key, health, comp, vacuum_time)
        if self.metrics is not None and health is not None and engine_table is not None:
            ns, name = table.metadata.namespace or "default", table.metadata.name
            self.metrics.observe_table(ns, name, health)
            self.metrics.observe_table_log(ns, name, engine_table, health.version)
        return _Seen(engine_table, health, failure, runs, last_c, last_k, last_v, vacuum_time)

    def _plan_status(
        self, table: TxnTable, policy: CompactionPolicy | None, plan: CompactionPlan | None
    ) -> PlanStatus | None:
        """``plan`` as status shows it, with the Spark resources its run would be launched with
        (the same sizer the launch uses, so status and the run agree)."""
        if plan is None or policy is None:
            return None
        key = table.metadata.key
        sizing = self.sizer.size(key, policy, self._summaries.get(key), plan)
        resources = PlanResources(
            executors=sizing.executor_instances,
            executor_cores=sizing.executor_cores,
            executor_memory_bytes=sizing.executor_memory,
            driver_memory_bytes=sizing.driver_memory,
            sized_from=sizing.sized_from.value,
            reason=sizing.reason[:1024] or None,
        )
        return plan_status(plan, resources)

    def _foresee(
        self, table: TxnTable, comp: CompactionPolicy | None, seen: _Seen, now: datetime
    ) -> tuple[CompactionPlan | None, Conflicts]:
        """The next compaction run's plan (when the log could be read) and our runs' conflicts
        with other writers, with the back-off they call for."""
        key = table.metadata.key
        summary = self._summaries.get(key)
        plan = (
            self.foresight.plan(key, comp, summary, seen.runs, now)
            if comp is not None and summary is not None and seen.health is not None
            else None
        )
        conflicts = self.foresight.conflicts(
            table, comp, seen.runs, seen.last_compaction, now, metrics=self.metrics
        )
        return plan, conflicts

    def _retries(
        self, key: str, comp: CompactionPolicy | None, seen: _Seen, now: datetime
    ) -> dict[RunKind, Retry]:
        """The back-off of each run kind whose last run failed; a compaction that ran out of
        memory with all the policy allows is held until the policy changes."""
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
        if comp is not None:
            optimize = retries.get(RunKind.OPTIMIZE)
            attempt = optimize.attempt if optimize is not None else 0
            if (held := self.sizer.hold(key, comp, attempt)) is not None:
                retries[RunKind.OPTIMIZE] = held
        return retries

    def _compact_and_vacuum(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        health: TableHealth,
        acts: _Acts,
        events: list[Event],
    ) -> None:
        """Decide and start the compaction, then the VACUUM-only run that waits for it."""
        decision = decide_compaction(table, policy, health, acts.work)
        acts.compaction = decision
        said = self.foresight.announcement(decision, table.status.conditions, acts.work.plan_id)
        if said is not None:
            events.append(Event("Normal", *said))
        name = self._start_compaction(table, policy, decision, events) if decision.launch else None
        if name:
            acts.last_compaction = acts.started(table, name, RunKind.OPTIMIZE, health.version)
        vacuum = decide_vacuum(table, policy, health, acts.work, decision)
        acts.vacuum = vacuum
        name = self._start_vacuum(table, policy, vacuum, events) if vacuum.launch else None
        if name:
            acts.last_vacuum = acts.started(table, name, RunKind.VACUUM, health.version)

    def _checkpoint(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        health: TableHealth,
        engine_table: Table,
        *,
        acts: _Acts,
        events: list[Event],
    ) -> None:
        """Decide and start (or write inline) the checkpoint."""
        decision = decide_checkpoint(table, policy, health, acts.work)
        acts.checkpoint = decision
        if not decision.launch:
            return
        record = self._start_checkpoint(
            table, policy, decision, engine_table=engine_table, events=events, now=acts.work.now
        )
        if record is not None and record is not acts.last_checkpoint:
            acts.last_checkpoint = record
            acts.launched.append(record.run_name)

    # -- runs ----------------------------------------------------------------------------
    def _backends(self, *policies: CompactionPolicy | CheckpointPolicy | None) -> set[Backend]:
        out = set()
        for p in policies:
            chosen = p.spec.spark.backend if p is not None else None
            out.add(chosen or Backend(self.config.default_backend))
        return out

    def _runs(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        ckpt: CheckpointPolicy | None,
        events: list[Event],
    ) -> list[RunStatus]:
        ns = table.metadata.namespace or "default"
        runs: list[RunStatus] = []
        for backend in sorted(self._backends(comp, ckpt)):
            launcher = self.launchers(backend)
            try:
                found = launcher.list_runs(ns, table.metadata.name)
            except LaunchError as exc:
                events.append(Event("Warning", EventReason.RUN_LIST_FAILED, str(exc)))
                continue
            found = self.sizer.detail(table.metadata.key, ns, launcher, found)
            runs.extend(found)
            limits = [p for p in (comp, ckpt) if p is not None]
            if limits:
                doomed = runs_to_delete(
                    found,
                    successful_limit=min(p.spec.successful_runs_history_limit for p in limits),
                    failed_limit=min(p.spec.failed_runs_history_limit for p in limits),
                )
                for run in doomed:
                    try:
                        launcher.delete(ns, run.name)
                    except LaunchError as exc:
                        log.warning("could not delete old run %s: %s", run.name, exc)
        return runs

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

    def _records(
        self,
        key: str,
        table: TxnTable,
        runs: list[RunStatus],
        engine_table: Table | None,
        events: list[Event],
    ) -> tuple[RunRecord | None, RunRecord | None, RunRecord | None]:
        status = table.status
        records = [status.last_compaction, status.last_checkpoint, status.last_vacuum]
        seen = self._recorded.setdefault(key, {})
        for index, kind in enumerate((RunKind.OPTIMIZE, RunKind.CHECKPOINT, RunKind.VACUUM)):
            stale = records[index]
            if stale is not None and stale.outcome in (RunOutcome.RUNNING, None):
                # recorded finished already (its object may be gone: history limits)
                records[index] = seen.get(stale.run_name, stale)
            mine = [r for r in runs if r.kind == kind]
            if not mine:
                continue
            newest = max(mine, key=lambda r: (r.created or r.started or _EPOCH, r.name))
            previous = records[index]
            if (
                previous is not None
                and previous.run_name != newest.name
                and _older(newest, previous)
            ):
                continue  # e.g. an inline checkpoint came after the newest launched run
            if newest.state.finished:
                if (
                    previous
                    and previous.run_name == newest.name
                    and previous.outcome not in (RunOutcome.RUNNING, None)
                ):
                    seen.setdefault(newest.name, previous)
                    continue  # already recorded (the status says so)
                if newest.name in seen:
                    records[index] = seen[newest.name]  # recorded; the status lags behind
                    continue
                record = self._finished_record(table, newest, engine_table, events)
                records[index] = seen[newest.name] = record
                for name in list(seen)[:-RECORDED_RUNS_KEPT]:
                    del seen[name]
            else:
                records[index] = RunRecord(
                    run_name=newest.name,
                    table=table.metadata.name,
                    outcome=RunOutcome.RUNNING,
                    start_time=(newest.started or newest.created or self.clock()).replace(
                        microsecond=0
                    ),
                    version=previous.version if previous else None,
                    message=running_note(newest) if kind == RunKind.OPTIMIZE else None,
                )
        return records[0], records[1], records[2]

    def _finished_record(
        self, table: TxnTable, run: RunStatus, engine_table: Table | None, events: list[Event]
    ) -> RunRecord:
        result = dict(run.result) if run.result else None
        outcome = outcome_of(result, run.state is RunState.SUCCEEDED)
        message = run.message or ""
        version = result.get("version") if result else None
        if outcome is RunOutcome.SUCCEEDED and run.kind == RunKind.OPTIMIZE and engine_table:
            confirmed = _confirmed_in_log(engine_table, run.name)
            message = (message + "; " if message else "") + (
                "commit confirmed in the table log" if confirmed else "no commit of this run found"
            )
        if self.metrics is not None:
            seconds = (
                (run.finished - run.started).total_seconds()
                if run.finished and run.started
                else None
            )
            self.metrics.run_finished(
                table.metadata.namespace or "default",
                table.metadata.name,
                run.kind,
                outcome,
                seconds=seconds,
                result=result,
            )
        kind_word = (run.kind or RunKind.CHECKPOINT).noun
        detail = run.message or (str(result.get("error") or "") if result else "")
        if run.kind == RunKind.VACUUM and result and isinstance(result.get("vacuum"), Mapping):
            message = (message + "; " if message else "") + _vacuum_note(result["vacuum"])
        # partitions deferred for other writers' recent work, rewritten bytes dropped
        note = planning_note(result)
        if note:
            message = (message + "; " if message else "") + note
            detail = (detail + "; " if detail else "") + note
        said = f"{kind_word} run {run.name}: {outcome.value}" + (f": {detail}" if detail else "")
        if run.out_of_memory and outcome is RunOutcome.FAILED:
            message = (message + "; " if message else "") + "out of memory"
            events.append(
                Event(
                    "Warning",
                    EventReason.RUN_OUT_OF_MEMORY,
                    f"{kind_word} run {run.name} ran out of memory",
                )
            )
        events.append(
            Event(
                "Normal" if outcome is not RunOutcome.FAILED else "Warning",
                EventReason.for_outcome(outcome),
                said[:1024],
            )
        )
        return RunRecord(
            run_name=run.name,
            table=table.metadata.name,
            outcome=outcome,
            start_time=_whole(run.started or run.created),
            completion_time=_whole(run.finished),
            version=version if isinstance(version, int) else None,
            message=message[:4000] or None,
        )

    def _start_compaction(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        decision: Decision,
        events: list[Event],
    ) -> str | None:
        key = table.metadata.key
        summary = self._summaries.get(key)
        plan = self.foresight.current(key, policy, summary) if summary is not None else None
        sizing = self.sizer.size(key, policy, summary, plan)
        try:
            req = compaction_request(table, policy, decision, self.config, sizing)
            launcher = self.launchers(req.backend)
            for old in decision.replace_runs:
                launcher.delete(req.namespace, old)
            status = launcher.launch(req)
        except PermanentLaunchError as exc:
            events.append(Event("Warning", EventReason.RUN_REJECTED, str(exc)))
            return None
        except LaunchError as exc:
            events.append(Event("Warning", EventReason.RUN_LAUNCH_FAILED, f"{exc} (will retry)"))
            return None
        if status.adopted and status.state.finished:
            # This run already ran (a restart lost its record): it is recorded from the
            # listing at the next tick, once, instead of being announced as a new start.
            log.info("compaction %s already finished (%s)", req.name, status.state.value)
            return None
        verb = "adopted" if status.adopted else "started"
        sized = f"; {sizing.reason}" if sizing.reason and not status.adopted else ""
        events.append(
            Event(
                "Normal",
                EventReason.RUN_STARTED,
                f"compaction {req.name} {verb}: {decision.message}{sized}"[:1024],
            )
        )
        log.info("compaction %s %s (%s)", req.name, verb, decision.message)
        return req.name

    def _start_vacuum(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        decision: Decision,
        events: list[Event],
    ) -> str | None:
        try:
            req = vacuum_request(table, policy, decision, self.config)
            status = self.launchers(req.backend).launch(req)
        except PermanentLaunchError as exc:
            events.append(Event("Warning", EventReason.RUN_REJECTED, str(exc)))
            return None
        except LaunchError as exc:
            events.append(Event("Warning", EventReason.RUN_LAUNCH_FAILED, f"{exc} (will retry)"))
            return None
        if status.adopted and status.state.finished:
            log.info("vacuum %s already finished (%s)", req.name, status.state.value)
            return None
        verb = "adopted" if status.adopted else "started"
        events.append(
            Event(
                "Normal", EventReason.RUN_STARTED, f"vacuum {req.name} {verb}: {decision.message}"
            )
        )
        log.info("vacuum %s %s (%s)", req.name, verb, decision.message)
        return req.name

    def _start_checkpoint(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        decision: Decision,
        *,
        engine_table: Table,
        events: list[Event],
        now: datetime,
    ) -> RunRecord | None:
        if decision.placement is Placement.INLINE:
            return self._inline_checkpoint(
                table, policy, engine_table, events=events, now=now, attempt=decision.attempt
            )
        try:
            req = checkpoint_request(table, policy, decision, self.config)
            status = self.launchers(req.backend).launch(req)
        except LaunchError as exc:
            events.append(Event("Warning", EventReason.RUN_LAUNCH_FAILED, str(exc)))
            return None
        if status.adopted and status.state.finished:
            log.info("checkpoint %s already finished (%s)", req.name, status.state.value)
            return None
        events.append(
            Event("Normal", EventReason.RUN_STARTED, f"checkpoint {req.name}: {decision.message}")
        )
        return RunRecord(
            run_name=req.name,
            table=table.metadata.name,
            outcome=RunOutcome.RUNNING,
            start_time=_whole(status.started or now),
        )

    def _inline_checkpoint(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        engine_table: Table,
        *,
        events: list[Event],
        now: datetime,
        attempt: int = 0,
    ) -> RunRecord:
        started = time.monotonic()
        snapshot = Snapshot.load(engine_table.storage)  # for this checkpoint only, not kept
        name = f"inline-checkpoint-{snapshot.version}" + (f"-r{attempt}" if attempt else "")
        try:
            result = write_checkpoint(snapshot, part_size=policy.spec.part_size)
            cleanup_note = ""
            if policy.spec.log_cleanup.enabled:
                cleaned = cleanup_expired_logs(
                    snapshot, retention_ms=policy.spec.log_cleanup.log_retention * 1000
                )
                cleanup_note = f", {len(cleaned.deleted)} expired log files deleted"
        except EngineError as exc:
            self._inline_finished(table, RunOutcome.FAILED, time.monotonic() - started)
            events.append(
                Event("Warning", EventReason.RUN_FAILED, f"inline checkpoint failed: {exc}")
            )
            return RunRecord(
                run_name=name,
                table=table.metadata.name,
                outcome=RunOutcome.FAILED,
                start_time=_whole(now),
                completion_time=_whole(self.clock()),
                version=snapshot.version,
                message=str(exc)[:4000],
            )
        seconds = time.monotonic() - started
        self._inline_finished(table, RunOutcome.SUCCEEDED, seconds)
        message = f"checkpoint at version {result.version} in {seconds:.2f}s{cleanup_note}"
        events.append(Event("Normal", EventReason.RUN_SUCCEEDED, message))
        return RunRecord(
            run_name=name,
            table=table.metadata.name,
            outcome=RunOutcome.SUCCEEDED,
            start_time=_whole(now),
            completion_time=_whole(self.clock()),
            version=result.version,
            message=message,
        )

    def _inline_finished(self, table: TxnTable, outcome: RunOutcome, seconds: float) -> None:
        if self.metrics is not None:
            ns = table.metadata.namespace or "default"
            self.metrics.run_finished(
                ns, table.metadata.name, RunKind.CHECKPOINT, outcome, seconds=seconds
            )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _last_vacuum_time(
    known: datetime | None, runs: Sequence[RunStatus], *, compaction_vacuums: bool
) -> datetime | None:
    """The later of ``known`` (the status) and the start of the newest finished run that
    VACUUMed the table (a VACUUM-only run, or a compaction run that ended with VACUUM): its
    VACUUM began no earlier, so it swept at least what was past the retention then."""
    times = [
        _whole(r.started or r.created or r.finished)
        for r in runs
        if r.state.finished
        and vacuumed(
            r.kind,
            r.result,
            r.state is RunState.SUCCEEDED,
            compaction_vacuums=compaction_vacuums,
        )
    ]
    found = [t for t in (known, *times) if t is not None]
    return max(found) if found else None


def _vacuum_note(doc: Mapping[str, Any]) -> str:
    """What a VACUUM-only run did, for its record's message."""
    verb = "would delete" if doc.get("dryRun") else "deleted"
    return f"VACUUM {verb} {doc.get('numFiles', 0)} files ({doc.get('bytes', 0)} bytes)"


def _whole(moment: datetime | None) -> datetime | None:
    return moment.replace(microsecond=0) if moment else None


def _older(run: RunStatus, record: RunRecord) -> bool:
    """Whether ``run`` began before the run ``record`` describes (seconds, as in status)."""
    began = _whole(run.created or run.started)
    return bool(began and record.start_time and began < record.start_time)


def _confirmed_in_log(table: Table, run_id: str, depth: int = 200) -> bool:
    """Whether a commit of the run (``commitInfo.txntableRunId``) is in the recent log."""
    try:
        return any(h.get("txntableRunId") == run_id for h in table.history(limit=depth))
    except EngineError:
        return False


def run_args(*parts: Any) -> tuple[str, ...]:
    return tuple(str(p) for p in parts if p is not None)
