"""A compaction run's resources as the controller builds them (``launch.sizing.size`` with what
``controller.foresee`` remembers, and ``controller.requests``, issue 16.3): the policy's figures
untouched when ``autoSize`` is off, plan-sized runs in both cluster manifests, the one memory
retry after an OOM, and the hold after a second one, released only by a higher ceiling."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.kube_fakes import FakeCore, FakeCustomObjects
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.conditions import Reason
from txntable.api.constants import ANNOTATION_SIZING
from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.config import Config, ConfigError
from txntable.controller.foresee import RunSizer, limits, plan_figures
from txntable.controller.requests import compaction_request
from txntable.engine.read.summary import TableSummary
from txntable.engine.table import Table
from txntable.launch import manifests
from txntable.launch.kubernetes import SparkApplicationLauncher
from txntable.launch.run import RunState, RunStatus
from txntable.launch.sizing import (
    GIB,
    MIB,
    PastPeak,
    PlanFigures,
    RunSize,
    SizedFrom,
    Sizing,
    size,
    task_memory,
)
from txntable.reconcile.decide import Decision
from txntable.reconcile.plan import plan_from_summary

WHEN = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
KEY = "uid-1"
OOM = "driver container failed with ExitCode: 137, Reason: OOMKilled"


def policy(
    auto: dict[str, Any] | None = None,
    backend: str = "SparkApplication",
    driver_memory: str | None = None,
) -> CompactionPolicy:
    spark: dict[str, Any] = {
        "backend": backend,
        "executor": {"instances": 3, "cores": 2, "memory": "1Gi"},
    }
    if driver_memory is not None:
        spark["driver"] = {"memory": driver_memory}
    if auto is not None:
        spark["autoSize"] = auto
    return CompactionPolicy.from_manifest(
        compaction_policy_manifest(
            "compact",
            namespace="lake",
            triggers={"smallFiles": 2},
            minFileSize="8Mi",
            spark=spark,
        )
    )


def table() -> TxnTable:
    return TxnTable.from_manifest(
        table_manifest("sales", "s3://bucket/sales", namespace="lake", metadata={"uid": KEY})
    )


def decision(attempt: int = 0) -> Decision:
    return Decision(True, Reason.TRIGGERED, "go", WHEN, "threshold", attempt=attempt)


def figures_for(summary: TableSummary, pol: CompactionPolicy) -> PlanFigures | None:
    """The figures of the plan the controller keeps for ``summary`` (``controller.foresee``)."""
    return plan_figures(plan_from_summary(summary, OptimizeOptions.from_spec(pol.spec)))


def run_size(
    sizer: RunSizer, pol: CompactionPolicy, summary: TableSummary | None = None
) -> RunSize:
    """What the tick asks: ``launch.sizing.size`` on the plan, the policy and the past runs."""
    figures = figures_for(summary, pol) if summary is not None else None
    return size(figures, limits(pol), sizer.past(KEY))


def sizing_of(sizer: RunSizer, pol: CompactionPolicy, summary: TableSummary | None) -> Sizing:
    return run_size(sizer, pol, summary).sizing


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> TableSummary:
    import pyarrow as pa

    path = Path(tmp_path_factory.mktemp("t")) / "sales"
    data = pa.table({"id": pa.array(range(1000), pa.int64())})
    t = Table.create(str(path), data.schema)
    for _ in range(6):
        t.append(data)
    return TableSummary.load(Table.open(str(path)).storage)


def test_without_autosize_the_policy_figures_run_as_written(summary: TableSummary) -> None:
    pol = policy()
    sized = sizing_of(RunSizer(), pol, summary)
    assert sized.sized_from is SizedFrom.POLICY
    plain = compaction_request(table(), pol, decision(), Config())
    req = compaction_request(table(), pol, decision(), Config(), sized)
    assert (req.executor_instances, req.executor.cores, req.executor.memory) == (3, 2, GIB)
    assert dict(req.spark_conf) == dict(plain.spark_conf) == {}
    app, bare = (
        manifests.spark_application(req, Config()),
        manifests.spark_application(plain, Config()),
    )
    app["metadata"]["annotations"].pop(ANNOTATION_SIZING)
    assert app == bare


def test_autosize_sizes_from_the_plan_in_both_manifests(summary: TableSummary) -> None:
    pol = policy({"enabled": True, "maxExecutorInstances": 4, "maxExecutorMemory": "8Gi"})
    figures = figures_for(summary, pol)
    assert figures is not None and figures.bins == 1 and figures.input_bytes > 0
    sized = sizing_of(RunSizer(), pol, summary)
    assert sized.sized_from is SizedFrom.PLAN and sized.executor_instances == 1
    req = compaction_request(table(), pol, decision(), Config(), sized)
    app = manifests.spark_application(req, Config())
    assert app["spec"]["executor"]["instances"] == 1
    assert app["spec"]["executor"]["memory"] == "1024m"
    overhead = app["spec"]["sparkConf"]["spark.executor.memoryOverhead"]
    assert overhead == f"{-(-sized.memory_overhead // MIB)}m"
    assert json.loads(app["metadata"]["annotations"][ANNOTATION_SIZING])["from"] == "Plan"
    args = manifests.submit_arguments(req, Config())
    assert f"spark.executor.memoryOverhead={overhead}" in args
    assert "spark.executor.instances=1" in args
    # the user's sparkConf wins over the sized settings
    base = policy({"enabled": True})
    user_conf = replace(base.spec.spark, spark_conf={"spark.sql.shuffle.partitions": "64"})
    mine = replace(base, spec=replace(base.spec, spark=user_conf))
    req = compaction_request(
        table(), mine, decision(), Config(), sizing_of(RunSizer(), mine, summary)
    )
    assert req.spark_conf["spark.sql.shuffle.partitions"] == "64"


def _failed(name: str, sizing_json: str | None, message: str = OOM) -> RunStatus:
    annotations = {ANNOTATION_SIZING: sizing_json} if sizing_json else {}
    return RunStatus(
        name=name,
        namespace="lake",
        state=RunState.FAILED,
        message=message,
        created=WHEN,
        labels={"txntable.io/kind": "optimize"},
        annotations=annotations,
        out_of_memory="OOMKilled" in message,
    )


class _Launcher:
    """Answers ``status`` with the run as listed (the detail adds nothing here)."""

    def __init__(self, runs: list[RunStatus]) -> None:
        self.runs = {r.name: r for r in runs}

    def status(self, namespace: str, name: str) -> RunStatus:
        return self.runs[name]


def test_one_memory_retry_then_a_hold_until_the_ceiling_rises(summary: TableSummary) -> None:
    pol = policy({"enabled": True, "maxExecutorMemory": "8Gi"})
    sizer = RunSizer()
    first = sizing_of(sizer, pol, summary)
    run1 = _failed("opt-1", first.to_annotation())
    sizer.detail(KEY, "lake", _Launcher([run1]), [run1])  # type: ignore[arg-type]
    assert run_size(sizer, pol).held is None
    retry = sizing_of(sizer, pol, summary)
    assert retry.sized_from is SizedFrom.MEMORY_RETRY
    assert retry.executor_memory == 2 * first.executor_memory
    assert retry.driver_memory == 2 * first.driver_memory
    run2 = _failed("opt-2", retry.to_annotation())
    run2 = RunStatus(**{**run2.__dict__, "created": WHEN.replace(hour=13)})
    sizer.detail(KEY, "lake", _Launcher([run1, run2]), [run1, run2])  # type: ignore[arg-type]
    held = run_size(sizer, pol).held
    assert held is not None and "opt-2 ran out of memory again" in held
    assert "not retried until that ceiling is raised" in held
    higher = policy({"enabled": True, "maxExecutorMemory": "32Gi"})
    assert run_size(sizer, higher).held is None
    again = sizing_of(sizer, higher, summary)
    assert again.executor_memory == 2 * retry.executor_memory
    assert "memory retry" in (again.running_note() or "")
    assert Sizing.from_annotation(again.to_annotation()) is not None
    assert sizing_of(RunSizer(), policy(), summary).running_note() is None  # the policy's own


def test_a_run_at_the_ceiling_is_held_at_once(summary: TableSummary) -> None:
    # a run that was given the whole ceiling (as sizing from a plan does for a task that needs
    # it): executors of 1 GiB heap + 512 MiB overhead, and the driver, at 1536Mi. (A ceiling of
    # only the policy's pod, 1 GiB + 384 MiB, is refused by the CRD and the model: issue 23.11.)
    pol = policy({"maxExecutorMemory": "1536Mi"}, driver_memory="1536Mi")
    sizer = RunSizer()
    had = replace(sizing_of(sizer, pol, summary), memory_overhead=512 * MIB)
    run = _failed("opt-1", had.to_annotation())
    sizer.detail(KEY, "lake", _Launcher([run]), [run])  # type: ignore[arg-type]
    held = run_size(sizer, pol).held
    assert held is not None and "opt-1 ran out of memory (" in held


def test_other_failures_are_not_memory_retries(summary: TableSummary) -> None:
    pol = policy({"enabled": True})
    sizer = RunSizer()
    run = _failed("opt-1", None, message="exit code 1: ValueError")
    sizer.detail(KEY, "lake", _Launcher([run]), [run])  # type: ignore[arg-type]
    assert run_size(sizer, pol).held is None
    assert sizing_of(sizer, pol, summary).sized_from is SizedFrom.PLAN


def test_the_newest_finished_run_is_read_in_detail_once(summary: TableSummary) -> None:
    api, core = FakeCustomObjects(), FakeCore()
    launcher = SparkApplicationLauncher(api, Config(), core)
    req = compaction_request(table(), policy(), decision(), Config())
    launcher.launch(req)
    app = api.objects[(req.namespace, req.name)]
    app["status"] = {
        "applicationState": {"state": "COMPLETED"},
        "driverInfo": {"podName": f"{req.name}-driver"},
    }
    result = {"runId": req.name, "peakTaskMemoryBytes": 3 * GIB, "largestBinBytes": 100 * MIB}
    core.logs[(req.namespace, f"{req.name}-driver", manifests.OPERATOR_DRIVER_CONTAINER)] = (
        json.dumps(result) + "\n"
    )
    sizer = RunSizer()
    listed = launcher.list_runs(req.namespace, req.table)
    assert listed[0].result is None
    (detailed,) = sizer.detail(KEY, req.namespace, launcher, listed)
    assert detailed.result == result
    reads = len(core.calls)
    sizer.detail(KEY, req.namespace, launcher, launcher.list_runs(req.namespace, req.table))
    assert len(core.calls) == reads  # not read again
    sized = sizing_of(sizer, policy({"enabled": True}), summary)
    figures = figures_for(summary, policy({"enabled": True}))
    assert figures is not None
    seen = PastPeak(task_memory_bytes=3 * GIB, largest_bin_bytes=100 * MIB)
    assert sized.task_memory == task_memory(figures.largest_bin_bytes, seen)
    assert sized.task_memory > task_memory(figures.largest_bin_bytes)  # the peak seen counts
    no_plan = sizing_of(sizer, policy({"enabled": True}), None)
    assert no_plan.sized_from is SizedFrom.POLICY


def test_finished_runs_live_as_long_as_the_controller_says() -> None:
    """TXNTABLE_RUN_TTL_SECONDS becomes the Job's ttlSecondsAfterFinished and the
    SparkApplication's timeToLiveSeconds (the real node's e2e waits for the pods to go)."""
    pol = policy()
    req = compaction_request(table(), pol, decision(), Config(run_ttl_seconds=45))
    assert req.ttl_seconds == 45
    assert manifests.spark_submit_job(req, Config())["spec"]["ttlSecondsAfterFinished"] == 45
    assert manifests.spark_application(req, Config())["spec"]["timeToLiveSeconds"] == 45
    with pytest.raises(ConfigError, match="RUN_TTL_SECONDS must be >= 30"):
        Config(run_ttl_seconds=10)
