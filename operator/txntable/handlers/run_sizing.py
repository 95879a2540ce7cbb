"""What sizing remembers of a table's finished compaction runs, and the policy's figures it
sizes within.

The rule itself is one pure function, ``launch.sizing.size``, which the tick calls once
(``handlers.operate``) with the plan's figures (``figures_of``: the plan the controller keeps in
status, ``handlers.foresight``), the policy's ``limits`` and ``RunSizer.past``. ``RunSizer``
keeps, per table, the newest finished compaction run (read once in detail through
``Launcher.status``, which for cluster runs is the only way to its result line and, for Jobs,
to its pods' ``OOMKilled``) and the highest task peak memory a run reported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from txntable.api.types import CompactionPolicy, RunKind
from txntable.handlers.memory import TableMemories
from txntable.launch import Launcher, RunState, RunStatus
from txntable.launch.errors import LaunchError
from txntable.launch.sizing import (
    Limits,
    OutOfMemory,
    PastPeak,
    PastRuns,
    PlanFigures,
    SizedFrom,
)
from txntable.reconcile.plan import CompactionPlan

log = logging.getLogger(__name__)

KIND = RunKind.OPTIMIZE


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


def figures_of(plan: CompactionPlan | None) -> PlanFigures | None:
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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
