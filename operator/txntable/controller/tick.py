"""One reconcile of one table, the tick: see, foresee, act, report.

The Kopf handlers and the local mode (``txntable run --local``) both call ``Operator.reconcile``,
so the cluster and the laptop run the same logic; only where manifests come from and where status
goes differ. Nothing in this module imports Kopf. ``reconcile`` reads as its pipeline, one step
a line, each returning the record the next one takes, and each stage in the module of its
concern:

* the governing policies (``reconcile.resolve``, ``_Governing``);
* ``see`` (``controller.runs``, ``Seen``): the log observed (``controller.observe``: a summary
  per table, never a snapshot), the runs listed, each finished run adopted once
  (``controller.run_records``);
* ``foresee`` (``_foresee``, with ``controller.foresee``; ``_Ahead``): the next compaction run's
  plan, our runs' conflicts with other writers, and the run's size (``launch.sizing.size``, from
  what ``controller.foresee`` remembers), computed once per tick and carried to the plan in
  status, the hold after a run out of memory and the launch, so they agree;
* ``act`` (``_act``, ``Acts``): what the decisions start from (``Work``: the runs in flight, the
  back-off after failed runs from ``controller.runs``, the plan's id), then compaction,
  VACUUM, checkpoint decided in that order (``controller.act``), held (``controller.holds``) or
  started through the one launch path (``controller.launching``);
* ``report`` (``_report``, ``Tick``): the runs remembered, the phase and Ready decided in one
  place (``reconcile.status.verdict``), the changes an on-call engineer must act on announced
  once, the metrics.

What is kept per table between ticks is in ``memories`` (``controller.memory``); ``forget`` drops
it all for a table that is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from txntable.api.conditions import ConditionType, Event
from txntable.api.table import PlanResources, PlanStatus
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable, TxnTableStatus
from txntable.config import Config
from txntable.controller.act import Acting, Acts
from txntable.controller.foresee import Conflicts, Foresight, RunSizer, limits, plan_figures
from txntable.controller.holds import Holds
from txntable.controller.launching import Launching
from txntable.controller.memory import TableMemories, TableMemory
from txntable.controller.observe import Observed, Observer
from txntable.controller.run_records import RunRecords, failures_in_a_row, retries_running
from txntable.controller.runs import RunTracker, Seen
from txntable.launch import Backend, Backoff, Launcher
from txntable.launch.sizing import RunSize, size
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.reconcile.decide import Work
from txntable.reconcile.plan import CompactionPlan, plan_status
from txntable.reconcile.resolve import Resolution, resolve
from txntable.reconcile.status import Failure, Outcome, table_status

__all__ = ["Observed", "Operator", "Tick"]


@dataclass(frozen=True, slots=True)
class Tick:
    """What one reconcile produced: the next status and the events to post."""

    status: TxnTableStatus
    events: tuple[Event, ...]
    launched: tuple[str, ...]
    active_runs: int


@dataclass(frozen=True, slots=True)
class _Ahead:
    """What the tick foresaw: the plan, the conflicts and the next compaction run's size
    (None: no compaction policy); status shows the size, and the launch uses the same."""

    plan: CompactionPlan | None
    conflicts: Conflicts
    size: RunSize | None


@dataclass(frozen=True, slots=True)
class _Governing:
    """The policies that govern the table this tick, each with why (``reconcile.resolve``)."""

    compaction: Resolution[CompactionPolicy]
    checkpoint: Resolution[CheckpointPolicy]


def _governing(
    table: TxnTable,
    compaction_policies: Sequence[CompactionPolicy],
    checkpoint_policies: Sequence[CheckpointPolicy],
    invalid_policies: Mapping[str, Mapping[str, str]] | None,
) -> _Governing:
    """The compaction and checkpoint policy ``table`` names among its namespace's, the ones
    that do not validate (``invalid_policies``, per kind) saying so."""
    invalid = invalid_policies or {}
    return _Governing(
        resolve(table, compaction_policies, "compaction", invalid.get("compaction")),
        resolve(table, checkpoint_policies, "checkpoint", invalid.get("checkpoint")),
    )


class RunsInFlight:
    """Every table's runs in flight after its last tick, and their sum: what the other
    tables' ticks count toward the controller-wide limit, whoever drives the ticks. Each tick
    asks how many the others have; summing every table's count at each tick made a round of
    ticks quadratic in the tables (at 3,000 tables, a fifth of the controller's busy CPU at
    start-up, by py-spy), so the sum is kept as ticks report their counts."""

    def __init__(self) -> None:
        self._runs: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def report(self, key: str, runs: int) -> None:
        """``key``'s runs in flight after its tick."""
        with self._lock:
            self._total += runs - self._runs.get(key, 0)
            if runs:
                self._runs[key] = runs
            else:
                self._runs.pop(key, None)

    def elsewhere(self, key: str) -> int:
        """The runs in flight of every table but ``key``."""
        with self._lock:
            return self._total - self._runs.get(key, 0)

    def forget(self, key: str, memory: TableMemory | None = None) -> None:
        """A table forgotten (``TableMemories.on_forget``) has no runs to count."""
        del memory
        self.report(key, 0)


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
    #: Everything kept per table between ticks, one record per table (``controller.memory``):
    #: the sub-records of the parts below.
    memories: TableMemories = field(default_factory=TableMemories)
    #: The table's handle and log summary (``Observed``).
    observer: Observer = field(init=False)
    #: The next compaction run's plan and the throughput it is estimated from.
    foresight: Foresight = field(init=False)
    #: What sizes compaction runs (peaks seen, the newest finished run, OOMs).
    sizer: RunSizer = field(init=False)
    #: Refused launches, unsupported steps, announced changes, spent approval.
    holds: Holds = field(init=False)
    #: The record made for each finished run already adopted (``RunRecords``).
    records: RunRecords = field(init=False)
    #: What starts runs (``controller.launching``).
    launching: Launching = field(init=False)
    #: The table's runs each tick: listed, adopted, backed off (``controller.runs``).
    tracker: RunTracker = field(init=False)
    acting: Acting = field(init=False)
    #: Every table's runs in flight and their sum, toward the controller-wide limit.
    in_flight: RunsInFlight = field(init=False, default_factory=RunsInFlight)
    #: This replica's share of ``max_concurrent_runs`` when replicas split the tables
    #: (``handlers.shards.run_share``); None: the whole limit.
    run_limit: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        self.observer = Observer(self.memories, self.engine_metrics)
        self.foresight = Foresight(self.memories)
        self.sizer = RunSizer(self.memories)
        self.holds = Holds(self.memories)
        self.records = RunRecords(self.clock, self.metrics, self.memories)
        self.launching = Launching(
            self.config, self.launchers, self.clock, self.holds, self.metrics
        )
        self.tracker = RunTracker(
            self.config,
            self.launchers,
            self.observer,
            self.records,
            self.sizer,
            self.holds,
            self.backoff,
            self.metrics,
        )
        self.acting = Acting(self.launching, self.holds, self.foresight, self.observer)
        self.memories.on_forget(self.in_flight.forget)
        if self.metrics is not None:
            self.memories.on_forget(self._unexport)

    def forget(self, key: str) -> None:
        """Forget everything kept of a table that is gone (``TableMemories.forget``)."""
        self.memories.forget(key)

    def reopen(self, key: str) -> None:
        """Open the table again at the next tick (``Observer.reopen``): its storage failed, its
        log could not be read, or its credentials changed; what was learnt of its runs stays."""
        self.observer.reopen(key)

    def _unexport(self, key: str, memory: TableMemory) -> None:
        """Drop a forgotten table's metric series."""
        if self.metrics is not None and memory.name is not None:
            self.metrics.forget_table(memory.namespace or "default", memory.name)

    # -- the tick ------------------------------------------------------------------------
    def reconcile(
        self,
        table: TxnTable,
        compaction_policies: Sequence[CompactionPolicy],
        checkpoint_policies: Sequence[CheckpointPolicy],
        *,
        storage_options: Mapping[str, str] | None = None,
        failure: Failure | None = None,
        invalid_policies: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Tick:
        """Observe ``table``, follow its runs, decide and act; return the next status.
        ``failure``: why the table cannot be observed at all this time (e.g. its Secret could
        not be read): it is reported as the log's failure would be, and nothing is decided.
        ``invalid_policies``: per kind (``compaction``, ``checkpoint``), the policies of the
        namespace that do not validate, by name, with why (a table naming one says so).
        The runs in flight toward ``TXNTABLE_MAX_CONCURRENT_RUNS``, a limit across all tables,
        are this table's and the other tables' as each one's last tick left them
        (``RunsInFlight``)."""
        now = self.clock()
        memory = self.memories.recall(table.metadata.key)
        memory.namespace, memory.name = table.metadata.namespace or "default", table.metadata.name
        policies = _governing(table, compaction_policies, checkpoint_policies, invalid_policies)
        events: list[Event] = []
        seen = self.tracker.see(
            table,
            policies.compaction.policy,
            policies.checkpoint.policy,
            storage_options,
            events,
            failure=failure,
        )
        table = seen.in_status(table)  # decide on what this tick learned, not on the last status
        ahead = self._foresee(table, policies.compaction.policy, seen, now)
        acts = self._act(table, policies, seen, ahead, now=now, events=events)
        return self._report(table, policies, seen, ahead, acts, events=events)

    def _foresee(
        self, table: TxnTable, comp: CompactionPolicy | None, seen: Seen, now: datetime
    ) -> _Ahead:
        """The next compaction run's plan (when the log could be read), our runs' conflicts
        with other writers with the back-off they call for, and the run's size."""
        key = table.metadata.key
        summary = self.observer.summary(key)
        plan = (
            self.foresight.plan(key, comp, summary, seen.runs, now)
            if comp is not None and summary is not None and seen.health is not None
            else None
        )
        conflicts = self.foresight.conflicts(
            table, comp, seen.runs, seen.last_compaction, now, metrics=self.metrics
        )
        sized = (
            size(plan_figures(plan), limits(comp), self.sizer.past(key))
            if comp is not None
            else None
        )
        return _Ahead(plan, conflicts, sized)

    def _work(
        self,
        table: TxnTable,
        comp: CompactionPolicy | None,
        seen: Seen,
        ahead: _Ahead,
        now: datetime,
    ) -> Work:
        """What the tick's decisions start from: the runs in flight, this table's and all
        tables' (toward the controller-wide limit), the back-off after failed runs, the
        conflicts' hold, and the plan's id with the approval already spent."""
        key = table.metadata.key
        spent = self.holds.spent(key) or table.status.spent_approval
        return Work(
            now,
            seen.active,
            len(seen.active) + self.in_flight.elsewhere(key),
            self.config.max_concurrent_runs if self.run_limit is None else self.run_limit(),
            self.tracker.retries(
                key, comp, seen, now, held=ahead.size.held if ahead.size else None
            ),
            conflicts=ahead.conflicts.hold,
            plan_id=self.foresight.plan_id(key, ahead.plan, table.status.plan, spent),
            spent_approval=spent,
        )

    def _act(
        self,
        table: TxnTable,
        policies: _Governing,
        seen: Seen,
        ahead: _Ahead,
        *,
        now: datetime,
        events: list[Event],
    ) -> Acts:
        """Decide and start the compaction and VACUUM, then the checkpoint, each seeing the
        runs started before it (``controller.act``); with the log unreadable nothing is."""
        work = self._work(table, policies.compaction.policy, seen, ahead, now)
        acts = Acts(work, seen.last_compaction, seen.last_checkpoint, seen.last_vacuum)
        if seen.health is None or seen.engine_table is None:
            return acts
        comp, ckpt = policies.compaction.policy, policies.checkpoint.policy
        if comp is not None and ahead.size is not None:  # sized whenever there is a policy
            self.acting.compact_and_vacuum(
                table, comp, seen, acts, events, sizing=ahead.size.sizing
            )
        if ckpt is not None:
            self.acting.checkpoint(
                table, ckpt, seen.health, seen.engine_table, acts=acts, events=events
            )
        return acts

    def _report(
        self,
        table: TxnTable,
        policies: _Governing,
        seen: Seen,
        ahead: _Ahead,
        acts: Acts,
        *,
        events: list[Event],
    ) -> Tick:
        """Remember the tick's last runs, then the next status (phase and Ready decided in
        ``reconcile.status``), the changes an on-call engineer must act on announced once, the
        metrics, and this table's runs in flight for the other tables' ticks."""
        key = table.metadata.key
        records = (acts.last_compaction, acts.last_checkpoint, acts.last_vacuum)
        self.records.remember(key, records, seen.vacuum_time)
        if self.metrics is not None:
            self.metrics.observe_failures(
                table.metadata.namespace or "default",
                table.metadata.name,
                failures_in_a_row(records),
            )
        status = table_status(table, self._outcome(policies, seen, ahead, acts))
        events.extend(
            Event("Warning", reason, message)
            for reason, message in self.holds.announcements(
                key, table.status.conditions, status.conditions
            )
        )
        self._export_readiness(table, status)
        self.in_flight.report(key, len(acts.work.active))
        return Tick(status, tuple(events), tuple(acts.launched), len(acts.work.active))

    def _outcome(self, policies: _Governing, seen: Seen, ahead: _Ahead, acts: Acts) -> Outcome:
        """Everything the tick learned, as ``reconcile.status`` renders it: what was seen,
        foreseen, decided and started (the plan with the run's size, made in ``_foresee``)."""
        return Outcome(
            now=acts.work.now,
            health=seen.health,
            failure=seen.failure,
            compaction=policies.compaction,
            checkpoint=policies.checkpoint,
            compaction_decision=acts.compaction,
            checkpoint_decision=acts.checkpoint,
            active=acts.work.active,
            last_compaction=acts.last_compaction,
            last_checkpoint=acts.last_checkpoint,
            vacuum_decision=acts.vacuum,
            last_vacuum=acts.last_vacuum,
            last_vacuum_time=seen.vacuum_time,
            plan=self._plan_status(policies.compaction.policy, ahead, acts.work.plan_id),
            conflicts=ahead.conflicts.status,
            retrying=retries_running(
                (acts.last_compaction, acts.last_checkpoint, acts.last_vacuum)
            ),
            spent_approval=acts.spent_approval,
        )

    def _export_readiness(self, table: TxnTable, status: TxnTableStatus) -> None:
        """Export the table's Ready condition and how often it is observed (the alerts on
        tables that stay not ready or unobserved)."""
        if self.metrics is None:
            return
        ready = next(c for c in status.conditions if c.type == ConditionType.READY)
        self.metrics.observe_readiness(
            table.metadata.namespace or "default",
            table.metadata.name,
            ready.is_true,
            str(ready.reason),
            table.spec.observe_interval,  # the daemon observes it that often (driver)
        )

    @staticmethod
    def _plan_status(
        policy: CompactionPolicy | None, ahead: _Ahead, plan_id: str | None
    ) -> PlanStatus | None:
        """The plan as status shows it (under ``plan_id``, what an approval names), with the
        Spark resources its run would be launched with (the tick's sizing, the launch's too)."""
        if ahead.plan is None or policy is None or plan_id is None or ahead.size is None:
            return None
        sizing = ahead.size.sizing
        resources = PlanResources(
            executors=sizing.executor_instances,
            executor_cores=sizing.executor_cores,
            executor_memory_bytes=sizing.executor_memory,
            driver_memory_bytes=sizing.driver_memory,
            sized_from=sizing.sized_from.value,
            reason=sizing.reason[:1024] or None,
        )
        return replace(plan_status(ahead.plan, resources), plan_id=plan_id)
