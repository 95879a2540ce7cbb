"""What the controller tells before it acts: the next compaction run's plan, the conflict
back-off and what sizes the run, kept per table between reconciles.

``Operator.reconcile`` (``controller.tick``) asks ``Foresight`` once per tick. The plan
(``reconcile.plan``) is recomputed from the table's summary only when the log, the policy or the
learnt throughput changed, or ``PLAN_REFRESH`` passed (removed files age past the retention with
no commit), so a tick of an idle table costs no planning and writes no status; the compaction run
started on that plan is sized from it (``plan_figures``), not from a second planning.
Conflict figures of our finished runs come from their result lines and are kept in
``status.conflicts`` (they outlive the runs' history limits and a controller restart); the
back-off they call for is ``reconcile.conflicts``.
Events for a compaction held by approval or by the back-off are posted once: when this controller
did not announce the same hold last and the Compacting condition read does not already say so (for
approval: for the same planId). The planId shown is remembered too: the status a tick reads may
lag behind the last patch, and an id must not change under an engineer who approves it.

The run's size is one pure function, ``launch.sizing.size``, which the tick calls once with the
plan's figures (``plan_figures``), the policy's ``limits`` and ``RunSizer.past``. ``RunSizer``
keeps, per table, the newest finished compaction run (read once in detail through
``Launcher.status``, which for cluster runs is the only way to its result line and, for Jobs,
to its pods' ``OOMKilled``) and the highest task peak memory a run reported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from txntable.api.conditions import Condition, ConditionType, EventReason, Reason
from txntable.api.errors import ApiError
from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import (
    CompactionPolicy,
    ConflictStatus,
    PlanStatus,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.controller.memory import TableMemories
from txntable.engine import (
    EngineError,
    Table,
    TableSummary,
    parse_schema,
    partition_physical_names,
    read_recent_activity,
)
from txntable.launch import Launcher, RunState, RunStatus
from txntable.launch.errors import LaunchError
from txntable.launch.sizing import (
    Limits,
    OutOfMemory,
    PastPeak,
    PastRuns,
    PlanFigures,
)
from txntable.maintenance.errors import MaintenanceError
from txntable.reconcile.conflicts import conflict_hold, conflict_status, figures_of, remember
from txntable.reconcile.decide import Decision, Hold
from txntable.reconcile.plan import (
    CompactionPlan,
    RunRate,
    all_bins_deferred,
    learn_rate,
    plan_from_summary,
    versioned_plan_id,
)

if TYPE_CHECKING:
    from txntable.observability.controller_metrics import ControllerMetrics

log = logging.getLogger(__name__)

#: A table's plan is recomputed at least this often (its VACUUM figures follow the clock).
PLAN_REFRESH = timedelta(minutes=10)
#: Newest commits read to tell whether a due run would defer every bin (``all_deferred``):
#: fewer than the run reads; a window with more commits is read in part, which can only make
#: the controller launch a run that then decides with the full window.
ACTIVITY_COMMITS = 200

_Signature = tuple[int, int, str, int | None, str | None, RunRate | None]


@dataclass(frozen=True, slots=True)
class Conflicts:
    """This tick's conflict figures: the status to write and the hold for the decision."""

    status: ConflictStatus | None
    hold: Hold | None
    #: seconds until the hold ends (0: none), for the metric
    seconds: float = 0.0


@dataclass
class Foreseen:
    """One table's sub-record of ``Foresight`` (``controller.memory``)."""

    #: the last plan, with what it was computed from and when
    plan: tuple[_Signature, datetime, CompactionPlan] | None = None
    #: the throughput learnt from finished runs
    rate: RunRate | None = None
    #: the planId this controller last put in status (the status a tick reads may lag)
    shown: str | None = None
    #: the compaction hold last announced, with the planId it named (approval)
    announced: tuple[Reason, str | None] | None = None


@dataclass
class Foresight:
    """Per table (``Foreseen``): the last plan (with what it was computed from) and the learnt
    throughput."""

    memories: TableMemories = field(default_factory=TableMemories)

    # -- the plan ------------------------------------------------------------------------
    def plan(
        self,
        key: str,
        policy: CompactionPolicy,
        summary: TableSummary,
        runs: Sequence[RunStatus],
        now: datetime,
    ) -> CompactionPlan | None:
        """The next compaction run's plan on ``summary`` (None when the policy cannot be
        planned on this table, e.g. a filter on a column it does not have)."""
        known = self.memories.of(key, Foreseen)
        rate = learn_rate(_throughput(runs), known.rate)
        meta = policy.metadata
        signature: _Signature = (
            summary.version,
            id(summary),
            meta.name,
            meta.generation,
            meta.resource_version if meta.generation is None else None,
            rate,
        )
        if rate is not None:
            known.rate = rate
        last = known.plan
        if last is not None and last[0] == signature and now - last[1] < PLAN_REFRESH:
            return last[2]
        spec = policy.spec
        try:
            made = plan_from_summary(
                summary,
                OptimizeOptions.from_spec(spec),
                vacuum=spec.vacuum.enabled,
                vacuum_retention_ms=spec.vacuum.retention * 1000 if spec.vacuum.retention else None,
                now_ms=int(now.timestamp() * 1000),
                rate=rate,
            )
        except (ApiError, EngineError, MaintenanceError) as exc:
            log.info("no plan for %s under policy %s: %s", key, meta.name, exc)
            known.plan = None
            return None
        known.plan = (signature, now, made)
        return made

    def current(
        self, key: str, policy: CompactionPolicy, summary: TableSummary
    ) -> CompactionPlan | None:
        """The plan ``plan()`` last made for ``key`` when it was made from ``summary`` (this
        log version) under ``policy`` as it is now; None when there is none or it is stale.
        The run's sizing reads its bins from it instead of planning the table again."""
        meta = policy.metadata
        foreseen = self.memories.peek(key, Foreseen)
        known = foreseen.plan if foreseen is not None else None
        if known is None:
            return None
        made_from = known[0][:5]
        now_from = (
            summary.version,
            id(summary),
            meta.name,
            meta.generation,
            meta.resource_version if meta.generation is None else None,
        )
        return known[2] if made_from == now_from else None

    def plan_id(
        self, key: str, plan: CompactionPlan | None, shown: PlanStatus | None, spent: str | None
    ) -> str | None:
        """The planId of ``plan`` that status shows and an approval names (``shown``: the
        status's plan; ``spent``: the approval a run was started with):
        ``reconcile.plan.versioned_plan_id``. It continues the id this controller put in
        status last, which the status read may not show yet: an id copied from a status and
        approved must not change because a lagging tick read no plan (a restarted controller
        reads it from status)."""
        known = self.memories.of(key, Foreseen)
        if plan is None:
            known.shown = None
            return None
        last = known.shown if known.shown is not None else shown.plan_id if shown else None
        known.shown = versioned_plan_id(plan.plan_id, plan.version, last, spent)
        return known.shown

    def all_deferred(
        self,
        key: str,
        *,
        policy: CompactionPolicy,
        summary: TableSummary | None,
        table: Table,
        decision: Decision,
        now: datetime,
    ) -> Decision:
        """``decision`` (a launch), or a wait when ``spec.avoidRecentWrites`` would make the
        run defer every bin of the current plan: each is in a partition other writers changed
        within the window (read from the newest commits, as the run reads them). Such a run
        could only defer, so none starts: not a pod or SparkApplication a minute for nothing.
        The log is read only here, for a compaction about to start."""
        settings = policy.spec.avoid_recent_writes
        plan = self.current(key, policy, summary) if summary is not None else None
        if not settings.within or plan is None or summary is None:
            return decision
        from txntable.maintenance.optimize import avoidance  # the run's own rule

        try:
            fields = parse_schema(summary.metadata.schema_string)
            activity = read_recent_activity(
                table.storage,
                summary.version,
                settings.within * 1000,
                partition_columns=summary.partition_columns,
                partition_keys=partition_physical_names(
                    fields, summary.partition_columns, summary.configuration
                ),
                now_ms=int(now.timestamp() * 1000),
                max_commits=ACTIVITY_COMMITS,
            )
        except EngineError as exc:
            log.info("recent writes of %s not read (%s): the run decides", key, exc)
            return decision
        hot = avoidance(activity, settings.writes.value.lower()).partitions
        if not all_bins_deferred(plan, hot):
            return decision
        return Decision(
            False,
            Reason.NOTHING_TO_DO,
            f"{decision.message}, but other writers changed every partition with a bin "
            f"({len(plan.bin_partitions)}) within {settings.within}s "
            "(spec.avoidRecentWrites): a run would defer them all",
        )

    # -- conflicts -----------------------------------------------------------------------
    def conflicts(
        self,
        table: TxnTable,
        policy: CompactionPolicy | None,
        runs: Sequence[RunStatus],
        last: RunRecord | None,
        now: datetime,
        *,
        metrics: ControllerMetrics | None = None,
    ) -> Conflicts:
        """Our runs' conflict figures (the status's, with newly finished runs in front) and
        the back-off ``policy`` asks for now."""
        finished = sorted(
            (r for r in runs if r.kind == RunKind.OPTIMIZE and r.state.finished),
            key=lambda r: (r.created or r.started or now, r.name),
            reverse=True,
        )
        new = [
            f
            for r in finished
            if r.state is RunState.SUCCEEDED and (f := figures_of(r.name, r.result)) is not None
        ]
        known = table.status.conflicts.runs if table.status.conflicts else ()
        figures = remember(known, new)
        settings = policy.spec.avoid_recent_writes.back_off if policy is not None else None
        ended = (last.completion_time or last.start_time) if last is not None else None
        running = last is not None and last.outcome == RunOutcome.RUNNING
        # the back-off holds the next run after a finished one: none while a run is in flight
        held = (
            conflict_hold(figures, settings, ended)
            if settings is not None and not running
            else None
        )
        active = held is not None and now < held.until
        seconds = (held.until - now).total_seconds() if held is not None and active else 0.0
        if metrics is not None:
            ns = table.metadata.namespace or "default"
            metrics.observe_conflict_backoff(ns, table.metadata.name, seconds)
        return Conflicts(
            status=conflict_status(figures, settings, held if active else None),
            hold=Hold(held.until, held.message) if held is not None and active else None,
            seconds=seconds,
        )

    # -- events ----------------------------------------------------------------------------
    def announcement(
        self,
        key: str,
        decision: Decision | None,
        conditions: Sequence[Condition],
        plan_id: str | None,
    ) -> tuple[EventReason, str] | None:
        """(reason, message) of the event to post for ``decision`` when it holds a compaction
        back for approval (of ``plan_id``) or conflicts, once: not when this controller
        announced the same hold last (the status read may not show it yet), nor when the
        Compacting condition read says so already (a restarted controller)."""
        known = self.memories.of(key, Foreseen)
        if decision is None or (reason := _HOLD_EVENTS.get(decision.why)) is None:
            known.announced = None
            return None
        hold = (decision.why, plan_id if decision.why is Reason.AWAITING_APPROVAL else None)
        said, known.announced = known.announced == hold, hold
        prior = next((c for c in conditions if c.type == ConditionType.COMPACTING), None)
        if said or (prior is not None and _says(prior, decision.why, plan_id)):
            return None
        return reason, decision.message


def _says(prior: Condition, why: Reason, plan_id: str | None) -> bool:
    """Whether the Compacting condition read already says the hold ``why`` (for approval: of
    ``plan_id``)."""
    if prior.reason != why:
        return False
    return why is Reason.CONFLICT_BACK_OFF or (
        plan_id is not None and f"plan {plan_id} " in prior.message
    )


def _throughput(runs: Sequence[RunStatus]) -> list[tuple[int, float]]:
    """(input bytes, seconds) of finished compaction runs with a result, newest first."""
    out: list[tuple[int, float]] = []
    done = [
        r for r in runs if r.kind == RunKind.OPTIMIZE and r.state is RunState.SUCCEEDED and r.result
    ]
    for run in sorted(
        done, key=lambda r: (r.finished or r.created or _EPOCH, r.name), reverse=True
    ):
        result = run.result or {}
        size, seconds = result.get("numBytesRemoved"), result.get("seconds")
        if isinstance(size, int) and isinstance(seconds, int | float):
            out.append((size, float(seconds)))
    return out


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: the decisions that hold a compaction back, and the event announcing each once
_HOLD_EVENTS: dict[Reason, EventReason] = {
    Reason.AWAITING_APPROVAL: EventReason.AWAITING_APPROVAL,
    Reason.CONFLICT_BACK_OFF: EventReason.CONFLICT_BACK_OFF,
}


# -- what sizes the next compaction run (``launch.sizing.size``) ---------------------------


def limits(policy: CompactionPolicy) -> Limits:
    """The policy's executor figures and ceilings (``spec.spark``)."""
    spark = policy.spec.spark
    return Limits(
        executor_instances=spark.executor.instances,
        executor_cores=spark.executor.cores,
        executor_heap=spark.executor.memory,
        driver_memory=spark.driver.memory,
        max_instances=spark.auto_size.max_executor_instances,
        max_memory=spark.auto_size.max_executor_memory,
        auto_size=spark.auto_size.enabled,
    )


def plan_figures(plan: CompactionPlan | None) -> PlanFigures | None:
    """What sizing reads of the plan: its bins, input bytes and largest bin."""
    if plan is None:
        return None
    return PlanFigures(
        input_bytes=plan.input_bytes, bins=plan.bins, largest_bin_bytes=plan.largest_bin_bytes
    )


def peak_of(result: Mapping[str, object] | None) -> PastPeak | None:
    """The task peak a run's result line reported (``peakTaskMemoryBytes``), if any."""
    if not result:
        return None
    peak, largest = result.get("peakTaskMemoryBytes"), result.get("largestBinBytes")
    if not isinstance(peak, int) or peak <= 0:
        return None
    largest_bin = largest if isinstance(largest, int) else 0
    return PastPeak(task_memory_bytes=peak, largest_bin_bytes=largest_bin)


@dataclass
class Sized:
    """One table's sub-record of ``RunSizer`` (``controller.memory``)."""

    newest: RunStatus | None = None
    peak: PastPeak | None = None


@dataclass
class RunSizer:
    """Per table (``Sized``): the newest finished compaction run and the highest task peak
    seen."""

    memories: TableMemories = field(default_factory=TableMemories)

    def detail(
        self, key: str, namespace: str, launcher: Launcher, runs: Sequence[RunStatus]
    ) -> list[RunStatus]:
        """``runs`` with the newest finished compaction run read in detail (once per run): its
        result line and whether it ran out of memory, which a listing may not carry."""
        out = list(runs)
        done = [r for r in out if r.kind == RunKind.OPTIMIZE and r.state.finished]
        if not done:
            return out
        newest = max(done, key=lambda r: (r.created or r.started or _EPOCH, r.name))
        known = self.memories.of(key, Sized)
        if known.newest is None or known.newest.name != newest.name:
            detailed = newest
            if newest.result is None or (
                newest.state is RunState.FAILED and not newest.out_of_memory
            ):
                try:
                    detailed = launcher.status(namespace, newest.name)
                except LaunchError as exc:
                    log.debug("no detail of run %s: %s", newest.name, exc)
            known.newest = detailed
            seen = peak_of(detailed.result)
            if seen is not None and (
                known.peak is None or seen.task_memory_bytes >= known.peak.task_memory_bytes
            ):
                known.peak = seen
        return [known.newest if r.name == newest.name and known.newest else r for r in out]

    def past(self, key: str) -> PastRuns:
        """What ``launch.sizing.size`` takes of the table's finished runs: the newest one when
        it ran out of memory, and the highest task peak seen."""
        known = self.memories.peek(key, Sized)
        if known is None:
            return PastRuns()
        run = known.newest
        oom = (
            OutOfMemory(run=run.name, had=run.sizing)
            if run is not None and run.state is RunState.FAILED and run.out_of_memory
            else None
        )
        return PastRuns(out_of_memory=oom, peak=known.peak)
