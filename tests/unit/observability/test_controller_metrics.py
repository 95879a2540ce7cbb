"""Controller metrics: gauges from health, commits classified from commitInfo, runs, reconciles."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry

from tests.conftest import TESTDATA
from tests.unit.txn_support import fast
from txntable.api.common import RunKind, RunOutcome
from txntable.engine.table import Table
from txntable.observability.controller_metrics import (
    METRICS,
    ControllerMetrics,
    run_outcome_label,
)
from txntable.observability.log_commits import classify, engine_family
from txntable.observability.metrics import EngineMetrics
from txntable.observability.run_report import engine_summary, parse_summary
from txntable.reconcile.health import TableHealth


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def health(**overrides: Any) -> TableHealth:
    base: dict[str, Any] = dict(
        version=42,
        min_reader_version=1,
        min_writer_version=2,
        reader_features=(),
        writer_features=(),
        files=10,
        size_bytes=1000,
        small_files=7,
        small_file_bytes=300,
        compactable_small_files=6,
        partitions=3,
        last_commit_time=datetime(2026, 1, 1, tzinfo=UTC),
        checkpoint_version=40,
        checkpoint_time=datetime(2025, 12, 31, tzinfo=UTC),
        commits_since_checkpoint=2,
        writable=True,
    )
    return TableHealth(**(base | overrides))


def test_table_gauges_follow_health_and_vanish_when_forgotten() -> None:
    m = ControllerMetrics()
    m.observe_table("ns", "orders", health())
    t = {"namespace": "ns", "table": "orders"}
    r = m.registry
    assert value(r, "txntable_table_version", **t) == 42
    assert value(r, "txntable_table_files", **t) == 10
    assert value(r, "txntable_table_bytes", **t) == 1000
    assert value(r, "txntable_table_small_files", **t) == 7
    assert value(r, "txntable_table_small_file_bytes", **t) == 300
    assert value(r, "txntable_table_compactable_small_files", **t) == 6
    assert value(r, "txntable_table_partitions", **t) == 3
    assert value(r, "txntable_table_commits_since_checkpoint", **t) == 2
    assert value(r, "txntable_table_writable", **t) == 1
    assert value(r, "txntable_table_maintainable", **t) == 1
    # OPTIMIZE refused, checkpoints and VACUUM still run (shredded variants, say)
    m.observe_table("ns", "orders", health(writable=False))
    assert value(r, "txntable_table_writable", **t) == 0
    assert value(r, "txntable_table_maintainable", **t) == 1
    m.observe_table("ns", "orders", health())
    assert value(r, "txntable_table_last_commit_timestamp_seconds", **t) == 1767225600
    assert value(r, "txntable_table_last_checkpoint_timestamp_seconds", **t) == 1767139200
    # a table whose checkpoint disappeared has no checkpoint timestamp (not a stale one)
    m.observe_table("ns", "orders", health(checkpoint_version=None, checkpoint_time=None))
    assert value(r, "txntable_table_last_checkpoint_timestamp_seconds", **t) is None
    m.observe_table("ns", "other", health())
    m.run_finished("ns", "orders", "optimize", "Failed", seconds=3.0, result=None)
    m.forget_table("ns", "orders")
    assert value(r, "txntable_table_version", **t) is None
    assert (
        value(r, "txntable_maintenance_runs_total", **t, kind="optimize", outcome="failed") is None
    )
    assert value(r, "txntable_table_version", namespace="ns", table="other") == 42


def test_a_forgotten_table_leaves_no_series_behind() -> None:
    """Every collector labelled by namespace and table drops the table (which ones follows from
    METRICS: the dropped-bytes and deferred-partitions counters were once left out)."""
    m = ControllerMetrics()
    m.observe_table("ns", "orders", health())
    m.observe_conflict_backoff("ns", "orders", 5.0)
    result = {
        "numFilesRemoved": 2,
        "numBytesDropped": 10,
        "deferredPartitions": ["day=1"],
        "vacuum": {"numDeleted": 1, "bytes": 5},
    }
    m.run_finished("ns", "orders", RunKind.OPTIMIZE, RunOutcome.SUCCEEDED, seconds=1, result=result)

    def names_of_orders() -> set[str]:
        return {
            s.name
            for family in m.registry.collect()
            for s in family.samples
            if s.labels.get("table") == "orders"
        }

    assert {
        "txntable_maintenance_bytes_dropped_total",
        "txntable_maintenance_partitions_deferred_total",
        "txntable_table_conflict_backoff_seconds",
    } <= names_of_orders()
    m.forget_table("ns", "orders")
    assert names_of_orders() == set()


def test_every_declared_metric_is_a_typed_attribute() -> None:
    assert set(ControllerMetrics.__annotations__) == {metric.attr for metric in METRICS}
    assert len({metric.name for metric in METRICS}) == len(METRICS)


def test_engine_family_from_engine_info() -> None:
    assert engine_family({"engineInfo": "txntable/0.1.0"}) == "txntable"
    assert engine_family({"engineInfo": "delta-rs:py-1.6.6", "clientVersion": "x"}) == "delta-rs"
    assert engine_family({"clientVersion": "delta-rs.0.17.0"}) == "delta-rs"
    assert engine_family({"engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}) == "spark"
    assert engine_family({"engineInfo": "Databricks-Runtime/14.3.x"}) == "spark"
    assert engine_family({"clusterId": "0416-131918-rebus430"}) == "spark"
    assert engine_family({}) == "other"


def test_lost_attempts_recorded_or_estimated() -> None:
    ours = classify({"version": 9, "engineInfo": "txntable/1", "txntableAttempt": 4})
    assert ours and (ours.lost_attempts, ours.outcome, ours.exact) == (3, "retried", True)
    rs = classify(
        {"version": 3, "engineInfo": "delta-rs:py-1", "operationMetrics": {"num_retries": 2}}
    )
    assert rs and (rs.engine, rs.lost_attempts, rs.exact) == ("delta-rs", 2, True)
    spark = "Apache-Spark/3.5.1 Delta-Lake/3.2.0"
    late = classify({"version": 12, "readVersion": 9, "engineInfo": spark})
    assert late and (late.lost_attempts, late.outcome, late.exact) == (1, "retried", False)
    prompt = classify({"version": 10, "readVersion": 9, "engineInfo": spark})
    assert prompt and (prompt.lost_attempts, prompt.outcome) == (0, "first_attempt")
    blind = classify({"version": 10, "operation": "WRITE"})
    assert blind and (blind.lost_attempts, blind.outcome) == (0, "unknown")
    assert classify({"operation": "WRITE"}) is None  # no version: cannot be counted once


def test_log_commits_counted_once_with_bounded_labels() -> None:
    m = ControllerMetrics()
    r = m.registry
    infos = [
        {"version": 1, "operation": "WRITE", "engineInfo": "txntable/1", "txntableAttempt": 1},
        {"version": 2, "operation": "WRITE", "engineInfo": "txntable/1", "txntableAttempt": 3},
        {"version": 3, "operation": "DELETE", "readVersion": 1, "engineInfo": "Apache-Spark/3"},
    ]
    assert m.observe_log_commits("ns", "t", infos) == 3
    assert m.observe_log_commits("ns", "t", infos[1:]) == 0  # already counted
    t = {"namespace": "ns", "table": "t"}
    w = {**t, "operation": "WRITE", "engine": "txntable"}
    assert value(r, "txntable_log_commits_total", **w, outcome="first_attempt") == 1
    assert value(r, "txntable_log_commits_total", **w, outcome="retried") == 1
    spark = {**t, "operation": "DELETE", "engine": "spark", "outcome": "retried"}
    assert value(r, "txntable_log_commits_total", **spark) == 1
    assert value(r, "txntable_log_commit_retries_total", **t, engine="txntable") == 2
    assert value(r, "txntable_log_commit_retries_total", **t, engine="spark") == 1
    # operation names are bounded: malformed and surplus names fold into OTHER
    odd = [{"version": 4 + i, "operation": f"OP{i}"} for i in range(60)]
    odd.append({"version": 100, "operation": "drop table /data/x"})
    m.observe_log_commits("ns", "t", odd)
    operations = {
        s.labels["operation"]
        for f in r.collect()
        if f.name == "txntable_log_commits"
        for s in f.samples
    }
    assert "OTHER" in operations and len(operations) <= 51


def test_table_log_starts_at_first_sight_then_counts_new_commits() -> None:
    engine = EngineMetrics()
    schema = pa.schema([("id", pa.int64())])
    uri = f"memory://ctl-log-{uuid.uuid4().hex}"
    table = Table.create(uri, schema, options=fast(observer=engine))
    m = ControllerMetrics()
    assert m.observe_table_log("ns", "t", table, table.version()) == 0  # baseline only
    for i in range(3):
        table.append(pa.table({"id": [i]}), options=fast(observer=engine))
    assert m.observe_table_log("ns", "t", table, table.version()) == 3
    assert m.observe_table_log("ns", "t", table, table.version()) == 0
    labels = {"namespace": "ns", "table": "t", "operation": "WRITE", "engine": "txntable"}
    assert value(m.registry, "txntable_log_commits_total", **labels, outcome="first_attempt") == 3


def test_runs_by_kind_and_outcome_with_engine_counters_from_the_result() -> None:
    engine = EngineMetrics()
    engine.on_attempt(_event(), 1)
    engine.on_retry(_event(), 1, 1)
    engine.on_attempt(_event(), 2)
    engine.on_finished(_event(), "committed", 2, 0.1)
    engine.on_conflict(_event(), "ConcurrentDeleteReadException")
    engine.on_finished(_event(), "conflict", 1, 0.1)
    summary = engine_summary(engine)
    assert summary == {
        "attempts": 2,
        "retries": 1,
        "commits": {"committed": 1, "conflict": 1},
        "conflicts": {"ConcurrentDeleteReadException": 1},
    }
    m = ControllerMetrics()
    r = m.registry
    result = {
        "numFilesRemoved": 40,
        "numFilesAdded": 2,
        "numBytesRemoved": 4000,
        "numBytesAdded": 3900,
        "engineMetrics": summary,
    }
    m.run_finished("ns", "t", "optimize", "Succeeded", seconds=12.5, result=result)
    m.run_finished("ns", "t", "optimize", "Failed", seconds=3.0, result={"error": "x"})
    m.run_finished("ns", "t", "optimize", "Conflicted")
    k = {"namespace": "ns", "table": "t", "kind": "optimize"}
    assert value(r, "txntable_maintenance_runs_total", **k, outcome="succeeded") == 1
    assert value(r, "txntable_maintenance_runs_total", **k, outcome="failed") == 1
    assert value(r, "txntable_maintenance_runs_total", **k, outcome="nothing_to_do") == 0
    assert value(r, "txntable_maintenance_consecutive_failures", **k) == 2
    assert value(r, "txntable_maintenance_run_duration_seconds_count", **k) == 2
    assert value(r, "txntable_maintenance_run_duration_seconds_sum", **k) == 15.5
    assert value(r, "txntable_maintenance_files_removed_total", **k) == 40
    assert value(r, "txntable_maintenance_bytes_added_total", **k) == 3900
    assert value(r, "txntable_run_commit_attempts_total", **k) == 2
    assert value(r, "txntable_run_commit_retries_total", **k) == 1
    assert value(r, "txntable_run_commits_total", **k, outcome="committed") == 1
    conflict = {**k, "conflict_type": "ConcurrentDeleteReadException"}
    assert value(r, "txntable_run_commit_conflicts_total", **conflict) == 1
    m.run_finished("ns", "t", "optimize", "NothingToDo", seconds=1.0)
    assert value(r, "txntable_maintenance_consecutive_failures", **k) == 0
    assert value(r, "txntable_maintenance_last_success_timestamp_seconds", **k)


def test_run_labels_and_result_parsing_stay_bounded() -> None:
    assert run_outcome_label("NothingToDo") == "nothing_to_do"
    assert run_outcome_label("Exploded") == "other"
    parsed = parse_summary(
        {"engineMetrics": {"attempts": -3, "commits": {"weird": 2}, "conflicts": {"Boom": 1}}}
    )
    assert parsed == {
        "attempts": 0,
        "retries": 0,
        "commits": {"other": 2},
        "conflicts": {"other": 1},
    }
    assert parse_summary({"engineMetrics": "nope"}) is None
    m = ControllerMetrics()
    m.run_finished("ns", "t", "vacuum-everything", "Succeeded", result={"numFilesRemoved": "9"})
    k = {"namespace": "ns", "table": "t", "kind": "other"}
    assert value(m.registry, "txntable_maintenance_runs_total", **k, outcome="succeeded") == 1
    assert value(m.registry, "txntable_maintenance_files_removed_total", **k) is None


def test_reconciles_and_the_last_successful_one() -> None:
    m = ControllerMetrics()
    r = m.registry
    assert value(r, "txntable_last_reconcile_timestamp_seconds") == 0
    assert value(r, "txntable_controller_start_time_seconds")
    m.reconcile_finished("table", 0.2, error=True)
    assert value(r, "txntable_last_reconcile_timestamp_seconds") == 0
    assert value(r, "txntable_reconciles_total", kind="table", outcome="ok") == 0
    m.reconcile_finished("table", 0.1, error=False)
    assert value(r, "txntable_reconciles_total", kind="table", outcome="error") == 1
    assert value(r, "txntable_reconcile_duration_seconds_count", kind="table") == 2
    assert (value(r, "txntable_last_reconcile_timestamp_seconds") or 0) > 1.7e9


def _event() -> Any:
    from txntable.engine.observer import CommitEvent

    return CommitEvent("ns/t", "OPTIMIZE", "SnapshotIsolation")


def test_timed_block_records_success_and_error() -> None:
    m = ControllerMetrics()
    with m.timed("table"):
        pass
    try:
        with m.timed("table"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    else:
        raise AssertionError("the exception must propagate")
    r = m.registry
    assert value(r, "txntable_reconciles_total", kind="table", outcome="ok") == 1
    assert value(r, "txntable_reconciles_total", kind="table", outcome="error") == 1


def test_spark_written_logs_are_classified_from_read_version() -> None:
    """Old Spark commits carry readVersion but no engineInfo; writers ran one at a time."""
    table = Table.open(str(TESTDATA / "with_checkpoint_no_last_checkpoint"))
    m = ControllerMetrics()
    assert m.observe_log_commits("ns", "t", table.history()) == 4
    t = {"namespace": "ns", "table": "t", "engine": "spark"}
    assert value(m.registry, "txntable_log_commits_total", **t, operation="WRITE",
                 outcome="first_attempt") == 3  # fmt: skip
    assert value(m.registry, "txntable_log_commits_total", **t, operation="CREATE TABLE",
                 outcome="unknown") == 1  # fmt: skip
    assert value(m.registry, "txntable_log_commit_retries_total", **t) == 0
