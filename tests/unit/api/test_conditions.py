"""metav1.Condition semantics: transition time moves only on a status flip; inputs never mutate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.case_ids import readable
from txntable.api import InvalidSpecError
from txntable.api.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    Reason,
    get_condition,
    is_condition_true,
    parse_time,
    remove_condition,
    set_condition,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
T2 = T0 + timedelta(minutes=10)
READY = ConditionType.READY


def test_new_condition_is_appended_with_now() -> None:
    out = set_condition((), READY, True, Reason.TABLE_HEALTHY, "ok", observed_generation=1, now=T0)
    assert out == (Condition(READY, ConditionStatus.TRUE, "TableHealthy", "ok", T0, 1),)


def test_same_status_keeps_transition_time_but_updates_the_rest() -> None:
    first = set_condition(
        (), READY, True, Reason.TABLE_HEALTHY, "v1", observed_generation=1, now=T0
    )
    second = set_condition(
        first, READY, ConditionStatus.TRUE, Reason.AS_EXPECTED, "v2", observed_generation=2, now=T1
    )
    (cond,) = second
    assert cond.last_transition_time == T0
    assert (cond.reason, cond.message, cond.observed_generation) == ("AsExpected", "v2", 2)


def test_flip_moves_transition_time() -> None:
    first = set_condition((), READY, True, Reason.TABLE_HEALTHY, "", observed_generation=1, now=T0)
    flipped = set_condition(
        first, READY, False, Reason.STORAGE_UNREACHABLE, "timeout", observed_generation=1, now=T1
    )
    back = set_condition(
        flipped, READY, True, Reason.TABLE_HEALTHY, "", observed_generation=1, now=T2
    )
    assert flipped[0].last_transition_time == T1
    assert flipped[0].status is ConditionStatus.FALSE
    assert back[0].last_transition_time == T2


def test_unknown_counts_as_a_flip() -> None:
    first = set_condition((), READY, True, "A", "", observed_generation=None, now=T0)
    out = set_condition(
        first, READY, ConditionStatus.UNKNOWN, "B", "", observed_generation=None, now=T1
    )
    assert out[0].last_transition_time == T1


def test_input_is_not_mutated_and_order_is_kept() -> None:
    conds = set_condition((), "Reachable", True, "A", "", observed_generation=1, now=T0)
    conds = set_condition(conds, READY, False, "B", "", observed_generation=1, now=T0)
    before = tuple(conds)
    out = set_condition(conds, "Reachable", False, "C", "", observed_generation=2, now=T1)
    assert conds == before
    assert [c.type for c in out] == ["Reachable", "Ready"]
    assert get_condition(out, "Reachable").status is ConditionStatus.FALSE  # type: ignore[union-attr]
    assert remove_condition(out, "Reachable") == (out[1],)


def test_is_condition_true() -> None:
    conds = set_condition((), READY, True, "A", "", observed_generation=1, now=T0)
    assert is_condition_true(conds, READY)
    assert not is_condition_true(conds, "Degraded")
    assert get_condition(conds, "Degraded") is None


def test_round_trip_through_json_shape() -> None:
    cond = Condition("Ready", ConditionStatus.FALSE, "RunFailed", "boom", T0, 3)
    data = cond.to_dict()
    assert data == {
        "type": "Ready",
        "status": "False",
        "reason": "RunFailed",
        "message": "boom",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "observedGeneration": 3,
    }
    assert Condition.from_dict(data) == cond


def test_reason_read_back_is_typed_and_written_as_plain_text() -> None:
    ours = Condition.from_dict(
        {
            "type": "Ready",
            "status": "False",
            "reason": "RunFailed",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    )
    assert ours.reason is Reason.RUN_FAILED
    foreign = Condition.from_dict(
        {
            "type": "Synced",
            "status": "True",
            "reason": "SyncedByArgo",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    )
    assert foreign.reason == "SyncedByArgo" and not isinstance(foreign.reason, Reason)
    written = ours.to_dict()["reason"]
    assert type(written) is str and written == "RunFailed"  # YAML's safe dumper takes it


def test_time_is_utc_with_offsets_normalised() -> None:
    assert parse_time("2026-01-01T13:00:00+01:00") == T0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reason": "not camel case"}, "reason"),
        ({"reason": ""}, "reason"),
        ({"type": "bad type!"}, "type"),
        ({"message": "x" * 32769}, "message"),
        ({"observed_generation": -1}, "observedGeneration"),
    ],
    ids=readable,
)
def test_invalid_conditions_are_rejected(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {
        "type": "Ready",
        "status": ConditionStatus.TRUE,
        "reason": "Ok",
        "message": "",
        "last_transition_time": T0,
    }
    with pytest.raises(InvalidSpecError) as info:
        Condition(**{**base, **kwargs})  # type: ignore[arg-type]
    assert info.value.field_path == field


def test_from_dict_rejects_garbage() -> None:
    with pytest.raises(InvalidSpecError):
        Condition.from_dict({"type": "Ready", "status": "Maybe", "lastTransitionTime": "x"})
