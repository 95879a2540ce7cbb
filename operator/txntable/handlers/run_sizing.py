"""The Spark resources of a table's next compaction run, and the one retry after an OOM.

``RunSizer`` keeps, per table, what sizing learns from finished runs: the newest finished
compaction run (read once in detail through ``Launcher.status``, which for cluster runs is the
only way to its result line and, for Jobs, to its pods' ``OOMKilled``) and the highest task peak
memory a run reported. From them and the policy it answers two questions of the controller:

* ``hold``: after a run that ran out of memory, may another start? A first OOM is retried once
  with more memory (``launch.sizing.memory_retry``); a memory retry that ran out of memory too,
  or a first run that had the ceiling already, is not retried: the table waits, with the reason
  in its status, until the policy's ceiling (``spec.spark.autoSize.maxExecutorMemory``) is
  raised past the one that run was sized under (then one more memory retry starts).
* ``size``: the next run's ``Sizing``: the memory retry after an OOM; with
  ``spec.spark.autoSize.enabled``, sized from the plan and the peaks seen (the plan the
  controller keeps in status, ``handlers.foresight``, when it is current; planned here with
  ``reconcile.plan.plan_from_summary`` only when there is none); otherwise the policy's figures
  as written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from txntable.api.errors import ApiError
from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import CompactionPolicy, RunKind
from txntable.engine import EngineError, TableSummary
from txntable.handlers.memory import TableMemories
from txntable.launch import Launcher, RunState, RunStatus
from txntable.launch.errors import LaunchError
from txntable.launch.sizing import (
    Limits,
    PastPeak,
    PlanFigures,
    SizedFrom,
    Sizing,
    fixed,
    memory_retry,
    size_run,
)
from txntable.maintenance.errors import MaintenanceError
from txntable.reconcile.decide import Retry
from txntable.reconcile.plan import CompactionPlan, plan_from_summary

log = logging.getLogger(__name__)

KIND = RunKind.OPTIMIZE


def limits(policy: CompactionPolicy) -> Limits:
    """The policy's executor figures and ceilings (``spec.spark``)."""
    spark = policy.spec.spark
    return Limits(
        executor_cores=spark.executor.cores,
        executor_heap=spark.executor.memory,
        driver_memory=spark.driver.memory,
        max_instances=spark.auto_size.max_executor_instances,
        max_memory=spark.auto_size.max_executor_memory,
    )


def policy_sizing(policy: CompactionPolicy) -> Sizing:
    """The policy's figures as written (``autoSize`` off, or no plan)."""
    return fixed(limits(policy), policy.spec.spark.executor.instances)


def plan_figures(
    summary: TableSummary | None,
    policy: CompactionPolicy,
    plan: CompactionPlan | None = None,
) -> PlanFigures | None:
    """Bins, input bytes and largest bin of the next run: from ``plan`` (the controller's
    current plan, ``Foresight.current``) when it was made at ``summary``'s version, else planned
    from the controller's summary."""
    if summary is None:
        return None
    if plan is None or plan.version != summary.version:
        spec = policy.spec
        try:
            plan = plan_from_summary(summary, OptimizeOptions.from_spec(spec))
        except (ApiError, EngineError, MaintenanceError, ValueError) as exc:
            log.debug("no plan to size the run by: %s", exc)
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


def _mib(n: int) -> str:
    return f"{-(-n // (1024 * 1024))} MiB"


def running_note(run: RunStatus) -> str | None:
    """What status says of a running compaction run that was sized (``lastCompaction.message``)."""
    sizing = run.sizing
    if sizing is None or sizing.sized_from is SizedFrom.POLICY:
        return None
    what = "memory retry" if sizing.sized_from is SizedFrom.MEMORY_RETRY else "sized from the plan"
    return (
        f"{what}: {sizing.executor_instances} executor(s) x {sizing.executor_cores} core(s), "
        f"{_mib(sizing.executor_memory)} each, driver {_mib(sizing.driver_memory)}"
    )


@dataclass
class Sized:
    """One table's sub-record of ``RunSizer`` (``handlers.memory``)."""

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
        done = [r for r in out if r.kind == KIND and r.state.finished]
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

    def _failed_oom(self, key: str) -> RunStatus | None:
        known = self.memories.peek(key, Sized)
        run = known.newest if known else None
        if run is not None and run.state is RunState.FAILED and run.out_of_memory:
            return run
        return None

    def _retry_of(self, run: RunStatus, policy: CompactionPolicy) -> tuple[Sizing, Sizing | None]:
        """What the OOM'd ``run`` had, and the memory retry after it (None: none can help)."""
        had = run.sizing or policy_sizing(policy)
        ceiling = limits(policy).max_memory
        if had.sized_from is SizedFrom.MEMORY_RETRY and ceiling <= had.ceiling:
            return had, None  # retried once already: only a ceiling raised since earns another
        return had, memory_retry(had, ceiling)

    def hold(self, key: str, policy: CompactionPolicy, attempt: int) -> Retry | None:
        """A back-off without end when the newest compaction run ran out of memory and no
        retry can give it more (``decide`` shows the message as BackingOff)."""
        run = self._failed_oom(key)
        if run is None:
            return None
        had, retry = self._retry_of(run, policy)
        if retry is not None:
            return None
        again = " again after its memory retry" if had.sized_from is SizedFrom.MEMORY_RETRY else ""
        return Retry(
            attempt,
            None,
            f"compaction run {run.name} ran out of memory{again} (executors of "
            f"{_mib(had.executor_memory)}, a driver of {_mib(had.driver_memory)}; "
            f"spec.spark.autoSize.maxExecutorMemory {_mib(limits(policy).max_memory)}): not "
            "retried until that ceiling is raised",
        )

    def size(
        self,
        key: str,
        policy: CompactionPolicy,
        summary: TableSummary | None,
        plan: CompactionPlan | None = None,
    ) -> Sizing:
        """The next compaction run's resources (module docstring); ``plan``: the controller's
        current plan of the table, planned again only when there is none."""
        run = self._failed_oom(key)
        if run is not None:
            _, retry = self._retry_of(run, policy)
            if retry is not None:
                return retry
        if not policy.spec.spark.auto_size.enabled:
            return policy_sizing(policy)
        figures = plan_figures(summary, policy, plan)
        if figures is None or figures.bins == 0:
            return policy_sizing(policy)
        known = self.memories.peek(key, Sized)
        return size_run(figures, limits(policy), known.peak if known else None)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
