"""The reasons of the Events the controller posts are one enum, spelled as docs/operations.md
lists them: a rename in code that the docs do not follow (or the reverse) fails here."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from txntable.api.common import RunOutcome
from txntable.api.conditions import EventReason, Reason


def _documented() -> dict[str, str]:
    """reason -> type, from the table under "Events on a table" in docs/operations.md."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("### Events on a table", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (Normal|Warning) \|", section, flags=re.MULTILINE))


def test_docs_list_every_event_reason_and_no_other() -> None:
    assert sorted(_documented()) == sorted(r.value for r in EventReason)


def test_event_reasons_keep_their_spellings() -> None:
    # these strings are what `kubectl get events` and users' alerts match: never rename one
    assert [r.value for r in EventReason] == [
        "RunStarted",
        "RunCannotStart",
        "RunSucceeded",
        "RunNothingToDo",
        "RunConflicted",
        "RunFailed",
        "RunOutOfMemory",
        "RunRejected",
        "RunLaunchFailed",
        "RunListFailed",
        "AwaitingApproval",
        "ConflictBackOff",
        "TableNotFound",
        "StorageUnreachable",
        "SecretNotFound",
        "SecretUnreadable",
        "CorruptLog",
        "UnsupportedProtocol",
        "UnsupportedTableFeature",
        "InvalidSpec",
    ]


@pytest.mark.parametrize(
    "outcome",
    [o for o in RunOutcome if o is not RunOutcome.RUNNING],
    ids=lambda o: o.value,
)
def test_every_finished_outcome_has_its_event_reason(outcome: RunOutcome) -> None:
    assert EventReason.for_outcome(outcome) == f"Run{outcome.value}"


def test_a_running_outcome_has_no_event_reason() -> None:
    with pytest.raises(ValueError, match="RunRunning"):
        EventReason.for_outcome(RunOutcome.RUNNING)


def test_hold_events_share_the_condition_reasons_spelling() -> None:
    assert EventReason.AWAITING_APPROVAL == Reason.AWAITING_APPROVAL
    assert EventReason.CONFLICT_BACK_OFF == Reason.CONFLICT_BACK_OFF


def test_events_announcing_a_status_change_share_its_reason() -> None:
    """Each Event posted once per change of a condition (controller.holds) is named by that
    condition's reason."""
    from txntable.controller.holds import ANNOUNCED

    for reasons in ANNOUNCED.values():
        for reason in reasons:
            assert EventReason(reason.value) == reason
