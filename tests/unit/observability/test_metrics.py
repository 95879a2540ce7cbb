"""Engine commit metrics: values after a scripted sequence of commits, naming rules, and the
documentation listing every metric."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.txn_support import add, fast, metadata, remove, storage_for
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendException,
    InvalidCommitError,
)
from txntable.engine.table import Table
from txntable.observability.metrics import EngineMetrics

DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_metric_values_after_a_scripted_sequence() -> None:
    registry = CollectorRegistry()
    metrics = EngineMetrics(registry)
    table = Table(storage_for("memory"))

    def opts(**kw: object) -> object:
        return fast(table_name="orders", observer=metrics, **kw)

    create = table.transaction(opts())  # type: ignore[arg-type]
    create.set_metadata(metadata())
    create.add(add("p=1/a"), add("p=1/b"))
    create.commit("CREATE TABLE AS SELECT")  # 1: committed, Serializable

    append = table.transaction(opts())  # type: ignore[arg-type]
    append.add(add("p=2/c", "2"))
    append.commit("WRITE")  # 2: committed

    optimize = table.transaction(opts())  # type: ignore[arg-type]
    optimize.scan("p = '1'")
    optimize.add(remove(add("p=1/a"), dc=False), remove(add("p=1/b"), dc=False))
    optimize.add(add("p=1/ab", dc=False))
    optimize.commit("OPTIMIZE")  # 3: downgraded to SnapshotIsolation

    snapshot = table.snapshot()
    loser = Transaction(table, snapshot, opts())  # type: ignore[arg-type]
    loser.scan("p = '1'")
    loser.add(add("p=1/x"))
    retried = Transaction(table, snapshot, opts())  # type: ignore[arg-type]
    retried.add(add("p=2/y", "2"))
    winner = Transaction(table, snapshot, opts())  # type: ignore[arg-type]
    winner.add(add("p=1/w"))
    winner.commit("WRITE")  # 4: committed
    with pytest.raises(ConcurrentAppendException):
        loser.commit("WRITE")  # 5: conflict after 1 attempt
    assert retried.commit("WRITE").attempts == 2  # 6: committed after one retry

    invalid = table.transaction(opts())  # type: ignore[arg-type]
    invalid.add(add("p=1/dup"), add("p=1/dup"))
    with pytest.raises(InvalidCommitError):
        invalid.commit("WRITE")  # 7: invalid, no attempt

    stale = Transaction(table, snapshot, opts(max_attempts=1))  # type: ignore[arg-type]
    stale.add(add("p=2/z", "2"))
    with pytest.raises(CommitRetriesExceededError):
        stale.commit("WRITE")  # 8: retries exceeded after 1 attempt

    r = registry
    t = {"table": "orders"}
    assert _value(r, "txntable_commit_attempts_total", operation="WRITE", **t) == 6
    assert _value(r, "txntable_commit_attempts_total", operation="OPTIMIZE", **t) == 1
    assert _value(r, "txntable_commit_attempts_total", operation="CREATE TABLE AS SELECT", **t) == 1
    committed = {"outcome": "committed", **t}
    assert (
        _value(
            r,
            "txntable_commits_total",
            operation="WRITE",
            isolation_level="Serializable",
            **committed,
        )
        == 3
    )
    assert (
        _value(
            r,
            "txntable_commits_total",
            operation="OPTIMIZE",
            isolation_level="SnapshotIsolation",
            **committed,
        )
        == 1
    )
    for outcome, level in (
        ("conflict", "Serializable"),
        ("invalid", "none"),
        ("retries_exceeded", "Serializable"),
    ):
        assert (
            _value(
                r,
                "txntable_commits_total",
                operation="WRITE",
                outcome=outcome,
                isolation_level=level,
                **t,
            )
            == 1
        ), outcome
    assert (
        _value(
            r,
            "txntable_commit_conflicts_total",
            operation="WRITE",
            conflict_type="ConcurrentAppendException",
            isolation_level="Serializable",
            **t,
        )
        == 1
    )
    assert _value(r, "txntable_commit_retries_total", operation="WRITE", **t) == 1
    assert (
        _value(
            r,
            "txntable_isolation_downgrades_total",
            operation="OPTIMIZE",
            table_level="Serializable",
            **t,
        )
        == 1
    )
    # attempts per finished commit: 3 committed WRITEs needed 1, 1 and 2 attempts
    hist = {"operation": "WRITE", "outcome": "committed", **t}
    assert _value(r, "txntable_commit_attempts_per_commit_count", **hist) == 3
    assert _value(r, "txntable_commit_attempts_per_commit_sum", **hist) == 4
    assert _value(r, "txntable_commit_attempts_per_commit_bucket", le="1.0", **hist) == 2
    assert _value(r, "txntable_commit_duration_seconds_count", **hist) == 3
    assert (
        _value(
            r, "txntable_commit_duration_seconds_count", operation="WRITE", outcome="invalid", **t
        )
        == 1
    )
    assert (
        _value(
            r,
            "txntable_commit_attempts_per_commit_count",
            operation="WRITE",
            outcome="invalid",
            **t,
        )
        == 0
    )


def test_unnamed_tables_get_a_fixed_label_never_a_path() -> None:
    registry = CollectorRegistry()
    table = Table(storage_for("memory"))
    txn = table.transaction(fast(observer=EngineMetrics(registry)))
    txn.set_metadata(metadata())
    txn.commit("CREATE TABLE")
    labels = {
        s.labels.get("table")
        for family in registry.collect()
        for s in family.samples
        if "table" in s.labels
    }
    assert labels == {"unnamed"}


def test_naming_rules_and_documentation() -> None:
    registry = CollectorRegistry()
    EngineMetrics(registry)
    EngineMetrics(CollectorRegistry())  # a second instance never collides (no module state)
    docs = DOCS.read_text()
    families = list(registry.collect())
    assert families
    for family in families:
        name = family.name
        assert name.startswith("txntable_"), name
        if family.type == "counter":
            assert f"`{name}_total`" in docs, name
        else:
            assert f"`{name}`" in docs, name
        if "duration" in name or "latency" in name:
            assert family.type == "histogram" and name.endswith("_seconds"), name
    for family in families:
        for sample in family.samples:
            assert not {"path", "version", "uri"} & set(sample.labels), sample
