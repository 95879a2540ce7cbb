"""Status never contradicts itself: the phase and the Ready condition agree, and Ready says why.

Before: phase Ready with Ready=False for an unknown policy reference, and Ready=True while the last
compaction had failed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.conftest import TESTDATA
from tests.support.health_oracle import observe
from tests.support.manifests import table_manifest
from txntable.api.common import RunRecord
from txntable.api.conditions import Reason
from txntable.api.table import TablePhase
from txntable.api.types import RunOutcome, TxnTable
from txntable.engine import Table
from txntable.reconcile.resolve import Resolution
from txntable.reconcile.status import Outcome, table_status

NOW = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
TABLE = TxnTable.from_manifest(
    table_manifest("events", "/nowhere", namespace="ns", metadata={"generation": 1})
)
NONE = Resolution(None, Reason.NO_POLICY, "no policy applies")


def _outcome(**changes: object) -> Outcome:
    base = {
        "now": NOW,
        "health": observe(Table.open(str(TESTDATA / "simple_table")).snapshot(), 1),
        "failure": None,
        "compaction": NONE,
        "checkpoint": NONE,
        "compaction_decision": None,
        "checkpoint_decision": None,
        "active": (),
        "last_compaction": None,
        "last_checkpoint": None,
    }
    return Outcome(**{**base, **changes})  # type: ignore[arg-type]


def _ready(status: object) -> tuple[str, str]:
    cond = next(c for c in status.conditions if c.type == "Ready")  # type: ignore[attr-defined]
    return cond.status, cond.reason


FAILED = RunRecord(run_name="opt-1", table="events", outcome=RunOutcome.FAILED, message="boom")
UNKNOWN = Resolution(None, Reason.POLICY_NOT_FOUND, "CompactionPolicy nightly does not exist")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param({"compaction": UNKNOWN}, "PolicyNotFound", id="unknown-compaction-policy"),
        pytest.param({"checkpoint": UNKNOWN}, "PolicyNotFound", id="unknown-checkpoint-policy"),
        pytest.param({"last_compaction": FAILED}, "RunFailed", id="last-compaction-failed"),
    ],
)
def test_not_ready_is_never_phase_ready(changes: dict[str, object], reason: str) -> None:
    status = table_status(TABLE, _outcome(**changes))
    assert _ready(status) == ("False", reason)
    assert status.phase is TablePhase.DEGRADED


def test_a_healthy_maintained_table_is_ready() -> None:
    status = table_status(TABLE, _outcome())
    assert _ready(status) == ("True", "TableHealthy")
    assert status.phase is TablePhase.READY


def _health_of(name: str) -> object:
    return observe(Table.open(str(TESTDATA / name)).snapshot(), 1)


@pytest.mark.parametrize(
    ("health", "policy", "ready", "says"),
    [
        # shredded variants: OPTIMIZE refuses, checkpoints, cleanup and VACUUM run
        pytest.param("variant-stats-no-checkpoint", False, "True", None, id="no-compaction-asked"),
        pytest.param(
            "variant-stats-no-checkpoint", True, "False", "never compacted", id="compaction-asked"
        ),
        pytest.param("column-mapping-id", True, "True", None, id="column-mapped"),
    ],
)
def test_ready_says_which_maintenance_the_protocol_refuses(
    health: str, policy: bool, ready: str, says: str | None
) -> None:
    from tests.support.decide import compaction

    chosen = Resolution(compaction(), Reason.POLICY_MATCHED, "matched") if policy else NONE
    status = table_status(TABLE, _outcome(health=_health_of(health), compaction=chosen))
    cond = next(c for c in status.conditions if c.type == "Ready")
    assert cond.status == ready
    if says is not None:
        assert cond.reason == "UnsupportedProtocol" and says in cond.message


def test_a_table_with_an_unknown_feature_is_observed_only() -> None:
    from dataclasses import replace

    health = replace(  # type: ignore[type-var]
        _health_of("simple_table"), maintainable=False, unmaintainable_reason="someFutureFeature"
    )
    status = table_status(TABLE, _outcome(health=health))
    cond = next(c for c in status.conditions if c.type == "Ready")
    assert (cond.status, cond.reason) == ("False", "UnsupportedProtocol")
    assert cond.message.startswith("observed only")
