"""A failed maintenance run, seen by the Kopf controller in-process against kmock (issue 13.4).

The stand-in for the Spark Operator fails every SparkApplication at once, the way the Spark
Operator reports a driver that died (``applicationState.state: FAILED`` with an
``errorMessage``). The controller then ticks many times (observe interval 1 s). It must adopt the
finished run once: one ``RunStarted`` and one ``RunFailed`` Event per real launch, the Event
saying why the run failed, no second launch inside the policy's back-off, and a phase that
stays ``Degraded`` instead of swinging back to ``Compacting`` at every tick.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.kmock_controller import (
    ERROR,
    FailingSparkOperator,
    apply,
    by_reason,
    fragmented_table,
    manifests,
    operate_until,
    register_resources,
    spark_apps,
    status,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_a_failed_run_is_recorded_once_and_backs_off(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    register_resources(kmock)
    docs = manifests(str(location))
    docs["checkpoint"]["spec"]["commitInterval"] = 1000  # only compaction in this test
    docs["compaction"]["spec"]["triggers"]["cooldown"] = "1s"
    apply(kmock, docs)
    phases: list[str] = []
    ticks: dict[str, float] = {}

    def settled() -> bool:
        phases.append(str(status(kmock).get("phase")))
        if not standin.failed:
            return False
        # After the first failure, let the controller tick many times (interval 1 s; the
        # back-off after one failure is at least 24 s, the cooldown is 1 s).
        return time.monotonic() > ticks.setdefault("until", time.monotonic() + 15)

    with FailingSparkOperator(kmock) as standin:
        assert await operate_until(kmock, settled, timeout=240), status(kmock)

    started, failed = by_reason(kmock, "RunStarted"), by_reason(kmock, "RunFailed")
    assert len(standin.failed) == 1, standin.failed  # the policy's back-off holds the retry
    assert len(started) == len(standin.failed), [e["message"] for e in started]
    assert len(failed) == len(standin.failed), [e["message"] for e in failed]
    assert ERROR in failed[0]["message"] and standin.failed[0] in failed[0]["message"]
    assert failed[0]["type"] == "Warning"
    st = status(kmock)
    assert st["lastCompaction"]["runName"] == standin.failed[0]
    assert ERROR in st["lastCompaction"]["message"]
    assert st["phase"] == "Degraded"
    # Once Degraded by the failure, the phase never swings back to Compacting.
    first = phases.index("Degraded")
    assert "Compacting" not in phases[first:], phases
    compacting = {c["type"]: c for c in st["conditions"]}["Compacting"]
    assert compacting["status"] == "False" and compacting["reason"] == "BackingOff"
    assert len(spark_apps(kmock)) == 1
