"""CompactionPolicy ``spec.avoidRecentWrites`` becomes the avoidance settings of the document the
optimize job receives, and the job turns them into the planner's policy; a human's flags take
durations in the CRDs' syntax."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from tests.unit.case_ids import readable
from tests.unit.policy_support import compaction_args, compaction_policy
from txntable.api.errors import InvalidSpecError
from txntable.api.types import CompactionPolicy
from txntable.jobs.optimize import add_arguments, options_from_args


def _policy(avoid: dict[str, Any] | None) -> CompactionPolicy:
    return compaction_policy({} if avoid is None else {"avoidRecentWrites": avoid})


def _args(policy: CompactionPolicy) -> tuple[str, ...]:
    return compaction_args(policy)


def _avoid_settings(args: tuple[str, ...]) -> dict[str, Any]:
    doc = json.loads(args[args.index("--options-json") + 1])
    return {k: doc[k] for k in ("avoidRecentWritesMs", "avoidWrites")}


@pytest.mark.parametrize(
    ("avoid", "window_ms", "writes"),
    [
        pytest.param(None, None, "removes", id="off-by-default"),
        pytest.param({"writes": "Any"}, None, "any", id="no-window-is-off"),
        pytest.param({"within": "10m"}, 600_000, "removes", id="removes"),
        pytest.param({"within": "1h30m", "writes": "Any"}, 5_400_000, "any", id="any"),
    ],
)
def test_spec_becomes_the_document_and_the_document_the_policy(
    avoid: dict[str, Any] | None, window_ms: int | None, writes: str
) -> None:
    args = _args(_policy(avoid))
    assert _avoid_settings(args) == {"avoidRecentWritesMs": window_ms, "avoidWrites": writes}
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    job_args = [a for a in args if a != "--master" and not a.startswith("local")]
    parsed, _ = parser.parse_known_args(job_args)
    policy = options_from_args(parsed)
    assert policy.avoid_recent_writes_ms == window_ms and policy.avoid_writes == writes


@pytest.mark.parametrize(
    "avoid",
    [{"within": "10 fortnights"}, {"within": "0s"}, {"writes": "Deletes"}, {"within": 600}],
    ids=readable,
)
def test_bad_values_are_refused(avoid: dict[str, Any]) -> None:
    with pytest.raises(InvalidSpecError, match="avoidRecentWrites"):
        _policy(avoid)


def test_bad_job_flag_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused when the job's arguments are parsed, before anything runs (exit 2)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["t", "--avoid-partitions-written-within", "soon"])
    assert stop.value.code == 2
    assert "--avoid-partitions-written-within: 'soon' is not a duration" in capsys.readouterr().err


def test_dropped_bytes_and_deferred_partitions_reach_the_controller_metrics() -> None:
    from prometheus_client import CollectorRegistry

    from txntable.observability.controller_metrics import ControllerMetrics

    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    deferred = [{"partitionValues": {"p": "a"}}, {"partitionValues": {"p": "b"}}]
    result = {"numBytesDropped": 1234, "deferredPartitions": deferred}
    metrics.run_finished("ns", "t", "optimize", "Succeeded", result=result)
    metrics.run_finished("ns", "t", "optimize", "Succeeded", result={"numBytesDropped": -5})
    labels = {"namespace": "ns", "table": "t", "kind": "optimize"}
    dropped = registry.get_sample_value("txntable_maintenance_bytes_dropped_total", labels)
    assert dropped == 1234
    got = registry.get_sample_value("txntable_maintenance_partitions_deferred_total", labels)
    assert got == 2


def test_planning_note_for_the_run_status() -> None:
    from txntable.observability.run_report import planning_note

    deferred = [{"partitionValues": {"p": f"p{i}", "d": "2024"}} for i in range(5)]
    note = planning_note({"deferredPartitions": deferred, "numBytesDropped": 42})
    assert note == (
        "5 partition(s) deferred, written recently by other writers "
        "(p=p0,d=2024; p=p1,d=2024; p=p2,d=2024 and 2 more); "
        "42 rewritten bytes dropped: other writers changed the inputs first"
    )
    assert planning_note({"deferredPartitions": [], "numBytesDropped": 0}) is None
    assert planning_note(None) is None
    assert planning_note({"deferredPartitions": "junk", "numBytesDropped": "x"}) is None
