"""Status never contradicts itself: the phase and the Ready condition agree, and Ready says why.

Before: phase Ready with Ready=False for an unknown policy reference, and Ready=True while the last
compaction had failed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.conftest import TESTDATA
from txntable.api.common import RunRecord
from txntable.api.conditions import Reason
from txntable.api.table import TablePhase
from txntable.api.types import RunOutcome, TxnTable
from txntable.engine import Table
from txntable.reconcile.health import observe
from txntable.reconcile.resolve import Resolution
from txntable.reconcile.status import Outcome, table_status

NOW = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
TABLE = TxnTable.from_manifest(
    {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": "TxnTable",
        "metadata": {"name": "events", "namespace": "ns", "generation": 1},
        "spec": {"location": "/nowhere"},
    }
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
