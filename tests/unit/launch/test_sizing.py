"""Spark resources sized from the plan (``launch.sizing``) and the one memory retry after an OOM
(issue 16.3): pure functions, so every rule is checked on figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from txntable.launch.run import out_of_memory
from txntable.launch.sizing import (
    BYTES_PER_INPUT_BYTE,
    GIB,
    MIB,
    WORKER_BASE_BYTES,
    Limits,
    OutOfMemory,
    PastPeak,
    PastRuns,
    PlanFigures,
    SizedFrom,
    Sizing,
    default_overhead,
    fixed,
    memory_retry,
    size,
    size_run,
    task_memory,
)

LIMITS = Limits(
    executor_instances=3,
    executor_cores=2,
    executor_heap=2 * GIB,
    driver_memory=1 * GIB,
    max_instances=10,
    max_memory=16 * GIB,
    auto_size=True,
)


def plan(bins: int, largest: int, total: int | None = None) -> PlanFigures:
    return PlanFigures(input_bytes=total or bins * largest, bins=bins, largest_bin_bytes=largest)


@pytest.mark.parametrize(
    ("figures", "instances", "cores"),
    [
        pytest.param(plan(1, 10 * MIB), 1, 2, id="one-small-bin-one-executor"),
        pytest.param(plan(40, 128 * MIB), 3, 2, id="bytes-bound-5GiB-needs-5-but-bins-20"),
        pytest.param(plan(8, 128 * MIB, 10 * GIB), 4, 2, id="bins-bound"),
        pytest.param(plan(100, 128 * MIB, 100 * GIB), 10, 2, id="capped-at-max-instances"),
        pytest.param(plan(0, 0), 1, 2, id="empty-plan-still-one-executor"),
    ],
)
def test_executors_follow_bins_and_bytes(figures: PlanFigures, instances: int, cores: int) -> None:
    sized = size_run(figures, LIMITS)
    expected = min(
        LIMITS.max_instances,
        -(-max(1, figures.bins) // cores),
        max(1, -(-figures.input_bytes // GIB)),
    )
    assert sized.executor_instances == max(1, expected)
    assert sized.executor_cores == cores
    assert sized.sized_from is SizedFrom.PLAN
    assert sized.parallelism == sized.executor_instances * sized.executor_cores


@pytest.mark.parametrize(
    "largest",
    [pytest.param(1 * MIB, id="1MiB"), pytest.param(256 * MIB, id="256MiB")],
)
def test_overhead_holds_every_core_s_task(largest: int) -> None:
    sized = size_run(plan(4, largest), LIMITS)
    need = WORKER_BASE_BYTES + int(BYTES_PER_INPUT_BYTE * largest)
    assert sized.task_memory == need
    assert sized.memory_overhead == default_overhead(LIMITS.executor_heap) + 2 * need
    assert sized.executor_heap == LIMITS.executor_heap
    assert sized.executor_memory <= LIMITS.max_memory
    conf = sized.spark_conf()
    assert conf["spark.executor.memoryOverhead"] == f"{-(-sized.memory_overhead // MIB)}m"
    assert conf["spark.sql.shuffle.partitions"] == str(sized.parallelism)


def test_a_big_bin_lowers_cores_to_fit_the_ceiling() -> None:
    limits = replace(
        LIMITS,
        executor_cores=4,
        executor_heap=GIB,
        driver_memory=GIB,
        max_instances=4,
        max_memory=8 * GIB,
    )
    sized = size_run(plan(8, GIB), limits)  # 4.6 GiB per task: one fits beside the heap
    assert sized.executor_cores == 1
    assert sized.executor_memory <= limits.max_memory
    assert "1 of 4 cores" in sized.reason


def test_a_bin_over_the_ceiling_gets_the_ceiling_and_says_so() -> None:
    limits = replace(
        LIMITS, executor_heap=GIB, driver_memory=GIB, max_instances=4, max_memory=4 * GIB
    )
    sized = size_run(plan(2, 2 * GIB), limits)
    assert sized.executor_cores == 1
    assert sized.executor_memory == limits.max_memory
    assert "may run out of memory" in sized.reason


@pytest.mark.parametrize(
    ("past", "expected"),
    [
        pytest.param(None, WORKER_BASE_BYTES + int(BYTES_PER_INPUT_BYTE * 100 * MIB), id="model"),
        pytest.param(
            PastPeak(task_memory_bytes=100 * MIB, largest_bin_bytes=100 * MIB),
            WORKER_BASE_BYTES + int(BYTES_PER_INPUT_BYTE * 100 * MIB),
            id="peak-below-model-keeps-model",
        ),
        pytest.param(
            PastPeak(task_memory_bytes=2 * GIB, largest_bin_bytes=50 * MIB),
            2 * GIB + int(BYTES_PER_INPUT_BYTE * 50 * MIB),
            id="peak-above-model-moved-along-slope",
        ),
    ],
)
def test_past_peaks_raise_the_estimate(past: PastPeak | None, expected: int) -> None:
    assert task_memory(100 * MIB, past) == expected


def test_fixed_sizing_adds_no_spark_conf() -> None:
    sized = fixed(LIMITS)
    assert (sized.executor_instances, sized.executor_cores) == (3, 2)
    assert sized.executor_heap == LIMITS.executor_heap
    assert sized.spark_conf() == {}


@pytest.mark.parametrize(
    ("heap", "ceiling", "executor_after"),
    [
        pytest.param(2 * GIB, 16 * GIB, 2 * (2 * GIB + default_overhead(2 * GIB)), id="doubled"),
        pytest.param(4 * GIB, 6 * GIB, 6 * GIB, id="capped-by-ceiling"),
    ],
)
def test_memory_retry_doubles_within_the_ceiling(
    heap: int, ceiling: int, executor_after: int
) -> None:
    failed = fixed(
        replace(
            LIMITS,
            executor_instances=2,
            executor_cores=1,
            executor_heap=heap,
            driver_memory=GIB,
            max_instances=2,
            max_memory=ceiling,
        )
    )
    retry = memory_retry(failed, ceiling)
    assert retry is not None
    assert retry.sized_from is SizedFrom.MEMORY_RETRY
    assert retry.executor_memory == executor_after
    assert retry.executor_heap >= failed.executor_heap
    assert retry.memory_overhead >= failed.memory_overhead
    assert retry.driver_memory == 2 * GIB
    assert retry.executor_instances == failed.executor_instances
    assert "spark.executor.memoryOverhead" in retry.spark_conf()


def test_no_memory_retry_at_the_ceiling() -> None:
    at_ceiling = Sizing(
        executor_instances=1,
        executor_cores=1,
        executor_heap=3 * GIB,
        memory_overhead=GIB,
        driver_memory=4 * GIB,
        sized_from=SizedFrom.PLAN,
    )
    assert memory_retry(at_ceiling, 4 * GIB) is None


def test_sizing_round_trips_through_its_annotation() -> None:
    sized = size_run(plan(5, 64 * MIB), LIMITS)
    back = Sizing.from_annotation(sized.to_annotation())
    assert back is not None
    assert back.executor_memory == sized.executor_memory
    assert back.sized_from is SizedFrom.PLAN
    assert (back.executor_instances, back.executor_cores) == (
        sized.executor_instances,
        sized.executor_cores,
    )
    assert Sizing.from_annotation("{not json") is None
    assert Sizing.from_annotation(None) is None


@pytest.mark.parametrize(
    ("text", "oom"),
    [
        pytest.param(
            "driver container failed with ExitCode: 137, Reason: OOMKilled", True, id="k8s"
        ),
        pytest.param("java.lang.OutOfMemoryError: Java heap space", True, id="jvm"),
        pytest.param("exit code 1: MemoryError", True, id="python"),
        pytest.param("Container killed by YARN for exceeding memory limits", True, id="yarn"),
        pytest.param("exit code -9", True, id="sigkill"),
        pytest.param(
            "26/12/01 23:16:38 WARN KubernetesClusterSchedulerBackend: OOM is detected.",
            True,
            id="spark-4-executor-pod-oomkilled",
        ),
        pytest.param("exit code 1: ValueError: bad", False, id="other-error"),
        pytest.param("exit code 1370", False, id="not-137"),
        pytest.param("", False, id="empty"),
    ],
)
def test_out_of_memory_messages(text: str, oom: bool) -> None:
    assert bool(out_of_memory(text)) is oom


# -- ``size``: the whole rule, in its order (module docstring) ------------------------------


def test_without_auto_size_or_plan_the_policy_figures_run_as_written() -> None:
    written = replace(LIMITS, auto_size=False)
    for limits, figures in ((written, plan(8, 128 * MIB)), (LIMITS, None), (LIMITS, plan(0, 0))):
        sized = size(figures, limits, PastRuns())
        assert sized.held is None
        assert sized.sizing == fixed(limits)
        assert (sized.sizing.executor_instances, sized.sizing.sized_from) == (3, SizedFrom.POLICY)
        assert sized.sizing.reason == "the policy's executors (spec.spark.executor)"


def test_auto_size_sizes_from_the_plan_and_the_peak_seen() -> None:
    figures = plan(8, 128 * MIB, 10 * GIB)
    peak = PastPeak(task_memory_bytes=3 * GIB, largest_bin_bytes=128 * MIB)
    assert size(figures, LIMITS, PastRuns()).sizing == size_run(figures, LIMITS)
    seen = size(figures, LIMITS, PastRuns(peak=peak))
    assert seen.held is None and seen.sizing == size_run(figures, LIMITS, peak)
    assert seen.sizing.task_memory == 3 * GIB and "3072 MiB seen" in seen.sizing.reason


def test_after_an_oom_the_memory_retry_comes_first_then_the_hold() -> None:
    figures = plan(8, 128 * MIB, 10 * GIB)
    first = size_run(figures, LIMITS)
    retry = size(figures, LIMITS, PastRuns(out_of_memory=OutOfMemory(run="opt-1", had=first)))
    assert retry.held is None and retry.sizing == memory_retry(first, LIMITS.max_memory)
    # the retry ran out of memory too: held, whatever the plan says, until the ceiling rises
    oom = PastRuns(out_of_memory=OutOfMemory(run="opt-2", had=retry.sizing))
    held = size(figures, LIMITS, oom)
    assert held.held is not None and "opt-2 ran out of memory again after its memory retry" in (
        held.held
    )
    assert "spec.spark.autoSize.maxExecutorMemory 16384 MiB" in held.held
    higher = size(figures, replace(LIMITS, max_memory=64 * GIB), oom)
    assert higher.held is None and higher.sizing.sized_from is SizedFrom.MEMORY_RETRY
    assert higher.sizing.executor_memory == 2 * retry.sizing.executor_memory


def test_an_oom_run_without_recorded_figures_had_the_policys() -> None:
    written = replace(LIMITS, auto_size=False)
    retry = size(None, written, PastRuns(out_of_memory=OutOfMemory(run="opt-1")))
    assert retry.sizing == memory_retry(fixed(written), written.max_memory)
    at_ceiling = replace(written, executor_heap=15 * GIB, driver_memory=16 * GIB)
    held = size(None, at_ceiling, PastRuns(out_of_memory=OutOfMemory(run="opt-1")))
    assert held.held is not None and "compaction run opt-1 ran out of memory (" in held.held
