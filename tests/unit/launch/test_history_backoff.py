"""History limits (which finished runs to delete) and retry backoff (when to try again)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.case_ids import readable
from txntable.launch.backoff import Backoff
from txntable.launch.history import runs_to_delete
from txntable.launch.run import ANNOTATION_POLICY, LABEL_KIND, RunState, RunStatus

T0 = datetime(2026, 11, 22, tzinfo=UTC)


def run(i: int, state: RunState, policy: str = "nightly", kind: str = "optimize") -> RunStatus:
    finished = T0 + timedelta(hours=i) if state.finished else None
    return RunStatus(
        name=f"{kind}-{policy}-{i:02d}",
        namespace="lake",
        state=state,
        created=T0 + timedelta(hours=i),
        finished=finished,
        labels={LABEL_KIND: kind},
        annotations={ANNOTATION_POLICY: policy},
    )


S, F, R, P, U = (
    RunState.SUCCEEDED,
    RunState.FAILED,
    RunState.RUNNING,
    RunState.PENDING,
    RunState.UNKNOWN,
)


@pytest.mark.parametrize(
    ("states", "keep_ok", "keep_failed", "doomed"),
    [
        ([], 3, 1, []),
        ([S, S, S], 3, 1, []),
        ([S, S, S, S, S], 3, 1, [0, 1]),
        ([F, F, F], 3, 1, [0, 1]),
        ([S, F, S, F, S, F], 1, 1, [0, 1, 2, 3]),
        ([S, F, R, P, U], 0, 0, [0, 1]),
        ([R, R, R, R], 0, 0, []),
    ],
    ids=readable,
)
def test_history_keeps_the_newest_of_each_outcome(
    states: list[RunState], keep_ok: int, keep_failed: int, doomed: list[int]
) -> None:
    runs = [run(i, s) for i, s in enumerate(states)]
    shuffled = runs[1::2] + runs[::2]
    out = runs_to_delete(shuffled, successful_limit=keep_ok, failed_limit=keep_failed)
    assert [r.name for r in out] == [runs[i].name for i in doomed]


def test_history_counts_each_policy_and_kind_apart() -> None:
    runs = [run(i, S, policy="a") for i in range(3)]
    runs += [run(i, S, policy="b") for i in range(3, 5)]
    runs += [run(i, S, policy="a", kind="checkpoint") for i in range(5, 7)]
    out = runs_to_delete(runs, successful_limit=2, failed_limit=1)
    assert [r.name for r in out] == ["optimize-a-00"]


def test_history_limits_must_not_be_negative() -> None:
    with pytest.raises(ValueError):
        runs_to_delete([], successful_limit=-1, failed_limit=1)


def test_backoff_grows_exponentially_with_bounded_jitter_and_a_cap() -> None:
    b = Backoff(base=30, factor=2, cap=600, jitter=0.2, max_retries=10)
    assert b.delay(0, "t") == 0
    for failures, full in [(1, 30), (2, 60), (3, 120), (5, 480), (6, 600), (9, 600), (500, 600)]:
        d = b.delay(failures, "lake/sales/nightly")
        assert 0.8 * full <= d <= full, (failures, d)


def test_backoff_is_deterministic_per_key_and_spread_across_keys() -> None:
    b = Backoff()
    assert b.delay(3, "lake/sales") == b.delay(3, "lake/sales")
    spread = {round(b.delay(3, f"lake/t{i}"), 3) for i in range(50)}
    assert len(spread) > 40
    assert Backoff(jitter=0).delay(3, "a") == Backoff(jitter=0).delay(3, "b") == 120


def test_backoff_gives_up_after_max_retries() -> None:
    b = Backoff(base=10, cap=100, jitter=0, max_retries=2)
    assert b.next_retry(T0, 1) == T0 + timedelta(seconds=10)
    assert b.next_retry(T0, 2) == T0 + timedelta(seconds=20)
    assert b.exhausted(3) and b.next_retry(T0, 3) is None


@pytest.mark.parametrize(
    "kw",
    [{"base": 0}, {"factor": 0.5}, {"cap": 1, "base": 2}, {"jitter": 1.0}, {"max_retries": -1}],
    ids=readable,
)
def test_backoff_settings_are_checked(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kw)  # type: ignore[arg-type]
