"""One reconcile of one table, with the I/O: observe the log, follow runs, decide, act.

The Kopf handlers and the local mode (``txntable run --local``) both call ``Operator.reconcile``,
so the cluster and the laptop run the same logic; only where manifests come from and where status
goes differ. Nothing in this module imports Kopf. Observation keeps a compact
``engine.read.summary.TableSummary`` per resource, never a snapshot (a few bytes per file; one
listing plus the new commits per tick); decisions are the pure functions of ``txntable.reconcile``
and the phase and Ready are decided in one place (``reconcile.status.verdict``).

Around them, per table: finished runs are adopted once (``handlers.run_records``), runs are
started through ``handlers.launching``, and ``handlers.holds`` keeps what must not be tried or
said again (a launch refused for good, a step a table feature stops, the changes announced as
Events, the plan approval spent on a run). After a failed run the next launch waits for the
back-off (``launch.Backoff``, at least the policy's cooldown) and is the next attempt, with a new
run name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from txntable.api import defaults as api_defaults
from txntable.api.conditions import ConditionType, EventReason, Reason
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
from txntable.engine import CommitOptions, Table
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
from txntable.handlers.holds import Holds, protocol_of
from txntable.handlers.launching import Launching, refusal_signature
from txntable.handlers.memory import TableMemories, TableMemory
from txntable.handlers.run_records import (
    Event,
    RunRecords,
    failures_in_a_row,
    last_vacuum_time,
    retries_running,
)
from txntable.handlers.run_sizing import RunSizer
from txntable.launch import (
    Backend,
    Backoff,
    Launcher,
    RunStatus,
    attempt_of,
    runs_to_delete,
)
from txntable.launch.errors import LaunchError
from txntable.launch.sizing import Sizing
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.reconcile.decide import (
    ActiveRun,
    Decision,
    Retry,
    Work,
    decide_checkpoint,
    decide_compaction,
    decide_vacuum,
)
from txntable.reconcile.health import TableHealth, observe_summary, swept_before, without_swept
from txntable.reconcile.plan import CompactionPlan, plan_status
from txntable.reconcile.resolve import resolve
from txntable.reconcile.status import Failure, Outcome, table_status

log = logging.getLogger(__name__)

DEFAULT_MIN_FILE_SIZE = parse_bytes(api_defaults.MIN_FILE_SIZE)
#: Full table loads (a first observation, or a summary that cannot be advanced) at once: each
#: peaks at ~140 MB above the summary it leaves for a 100,000-file table, and Kopf runs several
#: reconciles in threads, so a controller starting with many big tables would add them up.
FULL_LOADS_AT_ONCE = 2


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
    #: the plan approval a run started with this tick (now spent)
    spent_approval: str | None = None

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
class Observed:
    """One table's sub-record of observation (``handlers.memory``): its handle (holding no
    snapshot) and the summary of its log."""

    table: Table | None = None
    summary: TableSummary | None = None


@dataclass
class Operator:
    """Long-lived controller state: configuration, launchers and every table's memory."""

    config: Config
    launchers: Callable[[Backend], Launcher]
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    metrics: ControllerMetrics | None = None
    engine_metrics: EngineMetrics | None = None
    #: Retry delays after consecutive failed runs (the policy's cooldown is the floor).
    backoff: Backoff = field(default_factory=Backoff)
    #: Everything kept per table between ticks, one record per table (``handlers.memory``):
    #: ``Observed`` here, and the sub-records of the four below.
    memories: TableMemories = field(default_factory=TableMemories)
    _full_loads: threading.Semaphore = field(
        default_factory=lambda: threading.Semaphore(FULL_LOADS_AT_ONCE)
    )
    #: The next compaction run's plan and the throughput it is estimated from.
    foresight: Foresight = field(init=False)
    #: What sizes compaction runs (peaks seen, the newest finished run, OOMs).
    sizer: RunSizer = field(init=False)
    #: Refused launches, unsupported steps, announced changes, spent approval.
    holds: Holds = field(init=False)
    #: The record made for each finished run already adopted (``RunRecords``).
    followed: RunRecords = field(init=False)

    #: What starts runs (``handlers.launching``).
    launching: Launching = field(init=False)

    def __post_init__(self) -> None:
        self.foresight = Foresight(self.memories)
        self.sizer = RunSizer(self.memories)
        self.holds = Holds(self.memories)
        self.followed = RunRecords(self.clock, self.metrics, self.memories)
        if self.metrics is not None:
            self.memories.on_forget(self._unexport)
        self.launching = Launching(
            self.config, self.launchers, self.clock, self.holds, self.metrics
        )

    def _sizing(self, table: TxnTable, policy: CompactionPolicy) -> Sizing:
        """The next compaction run's resources, from the plan status shows when current."""
        key = table.metadata.key
        summary = self._summary(key)
        plan = self.foresight.current(key, policy, summary) if summary is not None else None
        return self.sizer.size(key, policy, summary, plan)

    def _summary(self, key: str) -> TableSummary | None:
        observed = self.memories.peek(key, Observed)
        return observed.summary if observed is not None else None

    # -- observation --------------------------------------------------------------------
    def _open(self, observed: Observed, table: TxnTable, options: Mapping[str, str]) -> Table:
        cached = observed.table
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
        observed.table = opened
        return opened

    def forget(self, key: str) -> None:
        """Forget everything kept of a table that is gone (``TableMemories.forget``)."""
        self.memories.forget(key)

    def reopen(self, key: str) -> None:
        """Open the table again at the next tick, with a fresh storage client (its storage
        failed, its log could not be read, or its credentials changed), and read its log again
        from scratch; what the controller learnt of its runs is kept."""
        observed = self.memories.peek(key, Observed)
        if observed is not None:
            observed.table = observed.summary = None

    def _unexport(self, key: str, memory: TableMemory) -> None:
        """Drop a forgotten table's metric series."""
        if self.metrics is not None and memory.name is not None:
            self.metrics.forget_table(memory.namespace or "default", memory.name)

    def _load_summary(self, storage: Storage) -> TableSummary:
        with self._full_loads:
            return TableSummary.load(storage)

    def _observe(
        self, key: str, table: TxnTable, options: Mapping[str, str], min_file_size: int
    ) -> tuple[Table | None, TableHealth | None, Failure | None]:
        observed = self.memories.of(key, Observed)
        try:
            engine_table = self._open(observed, table, options)
            known = observed.summary
            summary = (
                known.advance(engine_table.storage, reload=self._load_summary)
                if known is not None
                else self._load_summary(engine_table.storage)
            )
            observed.summary = summary
        except TableNotFoundError as exc:
            return None, None, Failure(Reason.TABLE_NOT_FOUND, str(exc))
        except StorageError as exc:
            self.reopen(key)
            return None, None, Failure(Reason.STORAGE_UNREACHABLE, str(exc))
        except UnsupportedFeatureError as exc:
            return None, None, Failure(Reason.UNSUPPORTED_PROTOCOL, str(exc))
        except CorruptLogError as exc:
            self.reopen(key)
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
        summary = self._summary(key)
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
        failure: Failure | None = None,
        invalid_policies: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Tick:
        """Observe ``table``, follow its runs, decide and act; return the next status.
        ``failure``: why the table cannot be observed at all this time (e.g. its Secret could
        not be read): it is reported as the log's failure would be, and nothing is decided.
        ``invalid_policies``: per kind (``compaction``, ``checkpoint``), the policies of the
        namespace that do not validate, by name, with why (a table naming one says so)."""
        now = self.clock()
        key = table.metadata.key
        memory = self.memories.recall(key)
        memory.namespace, memory.name = table.metadata.namespace or "default", table.metadata.name
        invalid = invalid_policies or {}
        comp = resolve(table, compaction_policies, "compaction", invalid.get("compaction"))
        ckpt = resolve(table, checkpoint_policies, "checkpoint", invalid.get("checkpoint"))
        events: list[Event] = []
        seen = self._see(table, comp.policy, ckpt.policy, storage_options, events, failure=failure)
        table = seen.in_status(table)  # decide on what this tick learned, not on the last status
        plan, conflicts = self._foresee(table, comp.policy, seen, now)
        spent = self.holds.spent(key) or table.status.spent_approval
        work = Work(
            now,
            seen.active,
            max(active_total, len(seen.active)),
            self.config.max_concurrent_runs,
            self._retries(key, comp.policy, seen, now),
            conflicts=conflicts.hold,
            plan_id=self.foresight.plan_id(key, plan, table.status.plan, spent),
            spent_approval=spent,
        )
        acts = _Acts(work, seen.last_compaction, seen.last_checkpoint, seen.last_vacuum)
        if seen.health is not None and seen.engine_table is not None:
            if comp.policy is not None:
                self._compact_and_vacuum(table, comp.policy, seen, acts, events)
            if ckpt.policy is not None:
                self._checkpoint(
                    table, ckpt.policy, seen.health, seen.engine_table, acts=acts, events=events
                )
        records = (acts.last_compaction, acts.last_checkpoint, acts.last_vacuum)
        self.followed.remember(key, records, seen.vacuum_time)
        if self.metrics is not None:
            self.metrics.observe_failures(
                table.metadata.namespace or "default",
                table.metadata.name,
                failures_in_a_row(records),
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
            plan=self._plan_status(table, comp.policy, plan, acts.work.plan_id),
            conflicts=conflicts.status,
            retrying=retries_running(records),
            spent_approval=acts.spent_approval,
        )
        status = table_status(table, outcome)
        events += [
            Event("Warning", reason, message)
            for reason, message in self.holds.announcements(
                key, table.status.conditions, status.conditions
            )
        ]
        if self.metrics is not None:
            ready = next(c for c in status.conditions if c.type == ConditionType.READY)
            self.metrics.observe_readiness(
                table.metadata.namespace or "default",
                table.metadata.name,
                ready.is_true,
                str(ready.reason),
                max(table.spec.observe_interval, self.config.observe_interval_seconds),
            )
        return Tick(status, tuple(events), tuple(acts.launched), len(acts.work.active))

    def _see(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        ckpt: CheckpointPolicy | None,
        storage_options: Mapping[str, str] | None,
        events: list[Event],
        *,
        failure: Failure | None = None,
    ) -> _Seen:
        """Observe the table's log and follow its runs: its health, the runs of its policies'
        backends, the last run of each kind and the last VACUUM; export the table's metrics.
        With ``failure`` the log is not read (the table cannot be opened)."""
        key = table.metadata.key
        options = dict(table.spec.storage.options) | dict(storage_options or {})
        min_size = comp.spec.min_file_size if comp else DEFAULT_MIN_FILE_SIZE
        if failure is not None:
            engine_table, health = None, None
        else:
            engine_table, health, failure = self._observe(key, table, options, min_size)
        runs, detail, prune = self._runs(table, comp, ckpt, events)
        stopped: list[tuple[RunKind, str]] = []
        last_c, last_k, last_v = self.followed.records(
            table, runs, engine_table, events, detail=detail, unsupported=stopped
        )
        prune()
        if health is not None:
            for kind, message in stopped:
                self.holds.unsupported(key, kind, protocol_of(health), message)
        vacuum_time = last_vacuum_time(
            self.followed.vacuum_time(key, table.status.last_vacuum_time),
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
        self,
        table: TxnTable,
        policy: CompactionPolicy | None,
        plan: CompactionPlan | None,
        plan_id: str | None,
    ) -> PlanStatus | None:
        """``plan`` as status shows it (under ``plan_id``, what an approval names), with the
        Spark resources its run would be launched with (the same sizer the launch uses, so
        status and the run agree)."""
        if plan is None or policy is None or plan_id is None:
            return None
        key = table.metadata.key
        sizing = self.sizer.size(key, policy, self._summary(key), plan)
        resources = PlanResources(
            executors=sizing.executor_instances,
            executor_cores=sizing.executor_cores,
            executor_memory_bytes=sizing.executor_memory,
            driver_memory_bytes=sizing.driver_memory,
            sized_from=sizing.sized_from.value,
            reason=sizing.reason[:1024] or None,
        )
        return replace(plan_status(plan, resources), plan_id=plan_id)

    def _foresee(
        self, table: TxnTable, comp: CompactionPolicy | None, seen: _Seen, now: datetime
    ) -> tuple[CompactionPlan | None, Conflicts]:
        """The next compaction run's plan (when the log could be read) and our runs' conflicts
        with other writers, with the back-off they call for."""
        key = table.metadata.key
        summary = self._summary(key)
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
        seen: _Seen,
        acts: _Acts,
        events: list[Event],
    ) -> None:
        """Decide and start the compaction, then the VACUUM-only run that waits for it. A kind
        refused for good or unsupported on this table is held (``Holds``); a due compaction
        whose every bin other writers are changing is not launched (``Foresight.all_deferred``).
        """
        health = seen.health
        if health is None or seen.engine_table is None:
            return  # not observed: nothing is decided (the caller does not ask)
        key = table.metadata.key
        decision = self._held(table, policy, RunKind.OPTIMIZE, health, acts.work)
        if decision.launch:
            decision = self.foresight.all_deferred(
                key,
                policy=policy,
                summary=self._summary(key),
                table=seen.engine_table,
                decision=decision,
                now=acts.work.now,
            )
        acts.compaction = decision
        said = self.foresight.announcement(decision, table.status.conditions, acts.work.plan_id)
        if said is not None:
            events.append(Event("Normal", *said))
        if decision.launch:
            started = self.launching.compaction(
                table, policy, decision, self._sizing(table, policy), events
            )
            if isinstance(started, Decision):
                acts.compaction = decision = started
            else:
                acts.last_compaction = acts.started(
                    table, started, RunKind.OPTIMIZE, health.version
                )
                if decision.approval is not None:
                    self.holds.spend(key, decision.approval)
                    acts.spent_approval = decision.approval
        vacuum = self._held(table, policy, RunKind.VACUUM, health, acts.work, compaction=decision)
        if vacuum.launch:
            started = self.launching.vacuum(table, policy, vacuum, events)
            if isinstance(started, Decision):
                vacuum = started
            else:
                acts.last_vacuum = acts.started(table, started, RunKind.VACUUM, health.version)
        acts.vacuum = vacuum

    def _held(
        self,
        table: TxnTable,
        policy: CompactionPolicy | CheckpointPolicy,
        kind: RunKind,
        health: TableHealth,
        work: Work,
        *,
        compaction: Decision | None = None,
    ) -> Decision:
        """The decision for ``kind``, held when a launch of it was refused under this policy
        and table (for good, or for want of permission until its retry time), or the step
        cannot work on this table's protocol (``Holds``)."""
        if isinstance(policy, CheckpointPolicy):
            decision = decide_checkpoint(table, policy, health, work)
        elif kind == RunKind.VACUUM:
            decision = decide_vacuum(table, policy, health, work, compaction)
        else:
            decision = decide_compaction(table, policy, health, work)
        return self.holds.hold(
            table.metadata.key,
            kind,
            decision,
            refused_under=refusal_signature(table, policy),
            protocol=protocol_of(health),
            now=work.now,
        )

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
        decision = self._held(table, policy, RunKind.CHECKPOINT, health, acts.work)
        acts.checkpoint = decision
        if not decision.launch:
            return
        record = self.launching.checkpoint(
            table,
            policy,
            decision,
            engine_table=engine_table,
            events=events,
            now=acts.work.now,
            protocol=protocol_of(health),
        )
        if isinstance(record, Decision):
            acts.checkpoint = record
        elif record is not None and record is not acts.last_checkpoint:
            acts.last_checkpoint = record
            acts.launched.append(record.run_name)
            held = self.holds.unsupported_hold(
                table.metadata.key, RunKind.CHECKPOINT, protocol_of(health)
            )
            if held is not None:  # the step cannot work on this table: say so now
                acts.checkpoint = held

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


def _whole(moment: datetime | None) -> datetime | None:
    return moment.replace(microsecond=0) if moment else None
