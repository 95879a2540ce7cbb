"""A compaction run that runs out of memory, seen by the Kopf controller against kmock (issue 16.3).

The stand-in for the Spark Operator fails every SparkApplication the way it reports a driver the
kubelet killed for its memory (``FAILED``, ``errorMessage`` with ``OOMKilled`` and exit code 137).
The policy sizes runs from the plan (``spec.spark.autoSize``). The controller must: size the
first run from the plan; after its OOM launch one retry with twice the executor and driver memory
(in the manifest and in the run's ``txntable.io/sizing`` annotation), post ``RunOutOfMemory``;
after the retry's OOM launch nothing more, and say why in the Compacting condition.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.kmock_controller import (
    FailingSparkOperator,
    apply,
    by_reason,
    fragmented_table,
    manifests,
    operate_until,
    register_resources,
    status,
)
from txntable.api.constants import ANNOTATION_SIZING

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

OOM = "driver container failed with ExitCode: 137, Reason: OOMKilled"
MIB = 1024 * 1024


def _mib(text: str) -> int:
    assert text.endswith("m"), text
    return int(text[:-1])


async def test_an_oom_run_is_retried_once_with_twice_the_memory(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    register_resources(kmock)
    docs = manifests(str(location))
    docs["checkpoint"]["spec"]["commitInterval"] = 1000  # only compaction in this test
    spec = docs["compaction"]["spec"]
    spec["triggers"]["cooldown"] = "1s"
    spec["spark"].update(
        {
            "executor": {"instances": 3, "cores": 1, "memory": "1Gi"},
            "autoSize": {"enabled": True, "maxExecutorInstances": 4, "maxExecutorMemory": "8Gi"},
        }
    )
    apply(kmock, docs)
    after: dict[str, float] = {}

    def settled() -> bool:
        if len(standin.apps) < 2 or len(by_reason(kmock, "RunOutOfMemory")) < 2:
            return False
        # both failed: give the controller time to (wrongly) launch a third run
        return time.monotonic() > after.setdefault("until", time.monotonic() + 8)

    with FailingSparkOperator(kmock, OOM) as standin:
        assert await operate_until(kmock, settled, timeout=240), (status(kmock), standin.apps)

    assert len(standin.apps) == 2, list(standin.apps)
    first, retry = sorted(standin.apps.values(), key=lambda a: a["metadata"]["name"])
    sized = json.loads(first["metadata"]["annotations"][ANNOTATION_SIZING])
    assert sized["from"] == "Plan"
    # one bin of a fragmented table: one executor, not the policy's three
    assert first["spec"]["executor"]["instances"] == 1
    again = json.loads(retry["metadata"]["annotations"][ANNOTATION_SIZING])
    assert again["from"] == "MemoryRetry"
    assert again["heap"] + again["overhead"] == 2 * (sized["heap"] + sized["overhead"])
    assert again["driver"] == 2 * sized["driver"]
    assert _mib(retry["spec"]["executor"]["memory"]) == again["heap"] // MIB
    assert _mib(retry["spec"]["driver"]["memory"]) == 2 * _mib(first["spec"]["driver"]["memory"])
    overhead = retry["spec"]["sparkConf"]["spark.executor.memoryOverhead"]
    assert _mib(overhead) == -(-again["overhead"] // MIB)

    ooms = by_reason(kmock, "RunOutOfMemory")
    assert len(ooms) == 2 and all(e["type"] == "Warning" for e in ooms)
    started = by_reason(kmock, "RunStarted")
    assert len(started) == 2
    assert "retry after running out of memory" in started[1]["message"]
    st = status(kmock)
    assert st["lastCompaction"]["runName"] == retry["metadata"]["name"]
    assert st["lastCompaction"]["outcome"] == "Failed"
    assert "out of memory" in st["lastCompaction"]["message"]
    compacting = {c["type"]: c for c in st["conditions"]}["Compacting"]
    assert compacting["reason"] == "BackingOff", compacting
    assert "ran out of memory again after its memory retry" in compacting["message"]
