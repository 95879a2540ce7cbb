"""Spark resources of a compaction run, sized from its plan and from past runs' peak memory.

``size`` is the whole rule, and "why N executors?" is answered here: the next compaction run
gets, in this order,

1. after a run that ran out of memory, the one memory retry (``memory_retry``); when that run
   was a memory retry already under today's ceiling, or had the ceiling, none: the run is
   *held* (``RunSize.held``) until ``spec.spark.autoSize.maxExecutorMemory`` is raised;
2. with ``spec.spark.autoSize.enabled`` and a plan with bins, figures sized from the plan and
   the highest task peak a run reported (``size_run``, below);
3. otherwise the policy's ``spec.spark.executor`` as written (``fixed``).

Each ``Sizing`` carries the sentence that says which and why (``reason``: status shows it in
``status.plan.resources.reason``, the run's ``RunStarted`` Event too).

A compaction run is one Spark task per bin (``maintenance.executor_spark``): a Python worker
reads the bin's inputs into Arrow and writes its outputs, so what a task slot needs is that
worker's peak, which grows with the bin's input bytes, and what the run needs in parallel is one
slot per bin. Python workers live outside the JVM heap, so their memory is the executor's
``spark.executor.memoryOverhead`` (the pod's memory is heap + overhead; Spark on Kubernetes
requests exactly that):

* per task: ``WORKER_BASE_BYTES + BYTES_PER_INPUT_BYTE * largest bin`` (``bench/task_memory.py``,
  docs/benchmarks.md), or, once a run reported its peak (``peakTaskMemoryBytes`` for a largest
  bin of ``largestBinBytes``), that peak moved along the same slope to this plan's largest bin,
  whichever is more;
* executors: one slot per bin, ``ceil(bins / cores)`` executors, no more than one per
  ``BYTES_PER_EXECUTOR`` of input (an executor costs a pod start) and at most the policy's
  ``maxExecutorInstances``;
* memory: the policy's heap, plus Spark's default overhead, plus ``cores`` tasks; when that
  passes the policy's ``maxExecutorMemory``, fewer cores per executor (fewer tasks share it),
  down to one; a task that does not fit even alone gets the ceiling and the sizing says so;
* parallelism: ``spark.default.parallelism`` and ``spark.sql.shuffle.partitions`` are the slots.

``memory_retry`` is the one retry after a run ran out of memory: heap, overhead and driver
memory times ``MEMORY_RETRY_FACTOR``, bounded by the ceiling; None when the run already had it.
Pure functions of plain numbers (the launch layer knows nothing of the engine's plan type); the
controller calls ``size`` once per tick with what the table's memory keeps of its finished runs
(``PastRuns``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from txntable.api.policies import OVERHEAD_MIN_BYTES

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
#: Peak memory of a rewrite task per input byte of its bin: the largest ratio
#: ``bench/task_memory.py`` measured (4.17 for a 16 MB bin, 2.9 for 257 MB), rounded up
BYTES_PER_INPUT_BYTE: Final = 4.5
#: A Python worker's own footprint before its first bin (80 MB measured with txntable and
#: pyarrow imported; pyspark's worker adds its own), rounded up
WORKER_BASE_BYTES: Final = 128 * MIB
#: Input bytes that justify one more executor pod (smaller runs use fewer, bigger executors)
BYTES_PER_EXECUTOR: Final = 1 * GIB
#: Spark's default executor memory overhead: 10 % of the heap, at least 384 MiB
OVERHEAD_FACTOR: Final = 0.10
OVERHEAD_MIN: Final = OVERHEAD_MIN_BYTES
#: Memory of the one retry after a run ran out of memory, relative to the failed run's
MEMORY_RETRY_FACTOR: Final = 2


class SizedFrom(StrEnum):
    """Where a run's resources came from (``status.compactionResources.sizedFrom``)."""

    POLICY = "Policy"
    PLAN = "Plan"
    MEMORY_RETRY = "MemoryRetry"


@dataclass(frozen=True, kw_only=True)
class PlanFigures:
    """What sizing reads of a compaction plan."""

    input_bytes: int
    bins: int
    largest_bin_bytes: int


@dataclass(frozen=True, kw_only=True)
class PastPeak:
    """A finished run's highest task peak memory and the input bytes of its largest bin."""

    task_memory_bytes: int
    largest_bin_bytes: int


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The policy's figures (``spec.spark``): its executors as written, the driver's memory,
    whether runs are sized from their plan, and the ceilings (``autoSize``) no sizing and no
    retry passes."""

    executor_instances: int
    executor_cores: int
    executor_heap: int
    driver_memory: int
    max_instances: int
    max_memory: int
    #: ``spec.spark.autoSize.enabled``: size runs from their plan
    auto_size: bool


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """The resources of one run: executor count, cores, heap and overhead, driver heap."""

    executor_instances: int
    executor_cores: int
    executor_heap: int
    memory_overhead: int
    driver_memory: int
    sized_from: SizedFrom
    #: the memory one task was estimated to need (0: not sized from a plan)
    task_memory: int = 0
    #: why these figures, in a sentence for status
    reason: str = ""
    #: the policy's memory ceiling when these figures were made (0: unknown)
    ceiling: int = 0

    @property
    def executor_memory(self) -> int:
        """Heap plus overhead: the executor pod's memory."""
        return self.executor_heap + self.memory_overhead

    @property
    def parallelism(self) -> int:
        """Task slots of the run (``spark.default.parallelism``, shuffle partitions)."""
        return self.executor_instances * self.executor_cores

    def to_annotation(self) -> str:
        """Compact JSON kept on the run object, so a restarted controller knows what a run had."""
        return json.dumps(
            {
                "instances": self.executor_instances,
                "cores": self.executor_cores,
                "heap": self.executor_heap,
                "overhead": self.memory_overhead,
                "driver": self.driver_memory,
                "from": self.sized_from.value,
                "task": self.task_memory,
                "ceiling": self.ceiling,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_annotation(cls, text: str | None) -> Sizing | None:
        """Read ``to_annotation``'s JSON back; None for a missing or unreadable value."""
        if not text:
            return None
        try:
            doc = json.loads(text)
            return cls(
                executor_instances=int(doc["instances"]),
                executor_cores=int(doc["cores"]),
                executor_heap=int(doc["heap"]),
                memory_overhead=int(doc["overhead"]),
                driver_memory=int(doc["driver"]),
                sized_from=SizedFrom(doc["from"]),
                task_memory=int(doc.get("task") or 0),
                ceiling=int(doc.get("ceiling") or 0),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def running_note(self) -> str | None:
        """What status says of a running compaction run sized this way
        (``lastCompaction.message``); None for the policy's own figures."""
        if self.sized_from is SizedFrom.POLICY:
            return None
        what = (
            "memory retry" if self.sized_from is SizedFrom.MEMORY_RETRY else "sized from the plan"
        )
        return (
            f"{what}: {self.executor_instances} executor(s) x {self.executor_cores} core(s), "
            f"{_mib(self.executor_memory)} each, driver {_mib(self.driver_memory)}"
        )

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings these figures add to the run (the user's sparkConf wins); none
        for the policy's own figures, which run exactly as written."""
        if self.sized_from is SizedFrom.POLICY:
            return {}
        return {
            "spark.executor.memoryOverhead": f"{-(-self.memory_overhead // MIB)}m",
            "spark.default.parallelism": str(self.parallelism),
            "spark.sql.shuffle.partitions": str(self.parallelism),
        }


@dataclass(frozen=True, kw_only=True)
class OutOfMemory:
    """The newest finished compaction run, which ran out of memory, and the resources it had
    (None: the run carries none, so it had the policy's)."""

    run: str
    had: Sizing | None = None


@dataclass(frozen=True, kw_only=True)
class PastRuns:
    """What sizing remembers of a table's finished compaction runs."""

    #: the newest one, when it ran out of memory
    out_of_memory: OutOfMemory | None = None
    #: the highest task peak a run reported
    peak: PastPeak | None = None


@dataclass(frozen=True, kw_only=True)
class RunSize:
    """The next compaction run's resources, and whether one may start at all."""

    sizing: Sizing
    #: why no compaction run may start (it ran out of memory with all the policy allows);
    #: None: one may
    held: str | None = None


def size(figures: PlanFigures | None, limits: Limits, past: PastRuns) -> RunSize:
    """The next compaction run's resources from the plan's ``figures`` (None: no plan), the
    policy's ``limits`` and the table's ``past`` runs: the rule in the module docstring."""
    held = None
    oom = past.out_of_memory
    if oom is not None:
        had = oom.had or fixed(limits)
        retried = had.sized_from is SizedFrom.MEMORY_RETRY and limits.max_memory <= had.ceiling
        retry = None if retried else memory_retry(had, limits.max_memory)
        if retry is not None:
            return RunSize(sizing=retry)
        again = " again after its memory retry" if had.sized_from is SizedFrom.MEMORY_RETRY else ""
        held = (
            f"compaction run {oom.run} ran out of memory{again} (executors of "
            f"{_mib(had.executor_memory)}, a driver of {_mib(had.driver_memory)}; "
            f"spec.spark.autoSize.maxExecutorMemory {_mib(limits.max_memory)}): not "
            "retried until that ceiling is raised"
        )
    if not limits.auto_size or figures is None or figures.bins == 0:
        return RunSize(sizing=fixed(limits), held=held)
    return RunSize(sizing=size_run(figures, limits, past.peak), held=held)


def default_overhead(heap: int) -> int:
    """Spark's default non-heap overhead of an executor with ``heap`` bytes of heap (in
    integers, as the CRD's CEL rule on ``autoSize.maxExecutorMemory`` computes it)."""
    return max(OVERHEAD_MIN, heap // round(1 / OVERHEAD_FACTOR))


def fixed(limits: Limits) -> Sizing:
    """The policy's own figures, unchanged (``autoSize`` off)."""
    return Sizing(
        executor_instances=limits.executor_instances,
        executor_cores=limits.executor_cores,
        executor_heap=limits.executor_heap,
        memory_overhead=default_overhead(limits.executor_heap),
        driver_memory=limits.driver_memory,
        sized_from=SizedFrom.POLICY,
        reason="the policy's executors (spec.spark.executor)",
        ceiling=limits.max_memory,
    )


def task_memory(largest_bin_bytes: int, past: PastPeak | None = None) -> int:
    """Memory one rewrite task needs for a bin of ``largest_bin_bytes``: the benchmark's model,
    or a past run's observed peak moved along the model's slope, whichever is more."""
    modelled = WORKER_BASE_BYTES + int(BYTES_PER_INPUT_BYTE * max(0, largest_bin_bytes))
    if past is None or past.task_memory_bytes <= 0:
        return modelled
    delta = int(BYTES_PER_INPUT_BYTE * (largest_bin_bytes - past.largest_bin_bytes))
    return max(modelled, past.task_memory_bytes + delta)


def size_run(plan: PlanFigures, limits: Limits, past: PastPeak | None = None) -> Sizing:
    """Executors, memory and parallelism for ``plan`` within ``limits`` (module docstring)."""
    if limits.max_instances < 1 or limits.executor_cores < 1:
        raise ValueError("executor cores and the instance ceiling must be >= 1")
    need = task_memory(plan.largest_bin_bytes, past)
    base = limits.executor_heap + default_overhead(limits.executor_heap)
    room = limits.max_memory - base
    cores = limits.executor_cores
    notes: list[str] = []
    if room < need:
        cores = 1
        notes.append(
            f"one task needs {_mib(need)}, more than the ceiling {_mib(limits.max_memory)} "
            f"leaves beside the heap: the run may run out of memory"
        )
    elif cores * need > room:
        cores = max(1, room // need)
        notes.append(f"{cores} of {limits.executor_cores} cores per executor fit the ceiling")
    bins = max(1, plan.bins)
    by_bins = -(-bins // cores)
    by_bytes = max(1, -(-plan.input_bytes // BYTES_PER_EXECUTOR))
    instances = max(1, min(limits.max_instances, by_bins, by_bytes))
    least = default_overhead(limits.executor_heap)
    overhead = max(least, min(least + cores * need, limits.max_memory - limits.executor_heap))
    seen = f", {_mib(past.task_memory_bytes)} seen" if past and past.task_memory_bytes > 0 else ""
    reason = (
        f"{plan.bins} bin(s), {_mib(plan.input_bytes)} in, largest bin "
        f"{_mib(plan.largest_bin_bytes)}: {_mib(need)} per task{seen}; {instances} executor(s) "
        f"x {cores} core(s), {_mib(limits.executor_heap + overhead)} each"
    )
    if instances == limits.max_instances and by_bins > instances:
        notes.append(f"executors capped at {limits.max_instances}")
    return Sizing(
        executor_instances=instances,
        executor_cores=cores,
        executor_heap=limits.executor_heap,
        memory_overhead=overhead,
        driver_memory=limits.driver_memory,
        sized_from=SizedFrom.PLAN,
        task_memory=need,
        reason="; ".join([reason, *notes]),
        ceiling=limits.max_memory,
    )


def memory_retry(
    failed: Sizing, max_memory: int, factor: int = MEMORY_RETRY_FACTOR
) -> Sizing | None:
    """The sizing of the one retry after ``failed`` ran out of memory: heap, overhead and
    driver memory times ``factor``, the executor and the driver each within ``max_memory``;
    None when neither would get more memory (the failed run was at the ceiling already)."""
    if factor < 2:
        raise ValueError("a memory retry needs a factor of at least 2")
    target = min(failed.executor_memory * factor, max_memory)
    heap, overhead = failed.executor_heap, failed.memory_overhead
    if target > failed.executor_memory:  # heap and overhead grow alike, to ``target``
        heap = failed.executor_heap * target // failed.executor_memory
        overhead = target - heap
    driver = max(failed.driver_memory, min(failed.driver_memory * factor, max_memory))
    if heap + overhead <= failed.executor_memory and driver <= failed.driver_memory:
        return None
    return replace(
        failed,
        executor_heap=heap,
        memory_overhead=overhead,
        driver_memory=driver,
        sized_from=SizedFrom.MEMORY_RETRY,
        ceiling=max_memory,
        reason=(
            f"retry after running out of memory: executors {_mib(failed.executor_memory)} -> "
            f"{_mib(heap + overhead)}, driver {_mib(failed.driver_memory)} -> {_mib(driver)} "
            f"(x{factor}, ceiling {_mib(max_memory)})"
        ),
    )


def _mib(n: int) -> str:
    return f"{-(-n // MIB)} MiB"
