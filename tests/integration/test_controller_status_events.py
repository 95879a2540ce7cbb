"""What the controller says about a missing Secret and a schedule it cannot evaluate: status,
one Event per change, a metric (issues 23.2 and 23.3). The Kopf controller in-process against
kmock, with real tables.

Before: a TxnTable whose ``secretRef`` names no Secret got no status, no Event and no metric,
only a log line every 30 s; a policy with ``0 0 30 2 *`` (admitted by the CRD) made its status
timer and every selected table's tick raise at every interval, with nothing on any status.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.kmock_controller import (
    COMPACTION,
    TABLES,
    apply,
    by_reason,
    fragmented_table,
    manifests,
    metrics_text,
    operate_until,
    register_resources,
)
from tests.support.manifests import compaction_policy_manifest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def _status(kmock: Any, key: tuple[str, str]) -> dict[str, Any]:
    try:
        return dict(kmock.objects[key[0], "default", key[1]].get("status") or {})
    except KeyError:
        return {}


def _conditions(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in st.get("conditions", [])}


def _events(kmock: Any, reason: str) -> list[dict[str, Any]]:
    return by_reason(kmock, reason)


async def test_a_missing_secret_and_a_schedule_that_never_fires_are_said_once(
    kmock: Any, tmp_path: Path
) -> None:
    register_resources(kmock)
    kmock.resources["v1/secrets"] = {"kind": "Secret", "namespaced": True, "verbs": ["get"]}
    location = tmp_path / "events"
    fragmented_table(location)
    docs = manifests(str(location), small_files=10_000)
    docs["table"]["spec"]["storage"] = {"secretRef": {"name": "lake-creds"}}
    apply(kmock, docs)
    never = compaction_policy_manifest(
        "never", metadata={"resourceVersion": "1"}, triggers={"schedule": "0 0 30 2 *"}
    )
    kmock.objects[COMPACTION, "default", "never"] = never
    other = tmp_path / "other"
    fragmented_table(other)
    second = {
        **docs["table"],
        "metadata": {**docs["table"]["metadata"], "name": "other", "uid": "uid-other"},
        "spec": {
            "location": str(other),
            "observeInterval": "1s",
            "compactionPolicyRef": {"name": "never"},
        },
    }
    kmock.objects[TABLES, "default", "other"] = second
    seen: dict[str, Any] = {}

    def said() -> bool:
        table, policy = _status(kmock, (TABLES, "events")), _status(kmock, (COMPACTION, "never"))
        done = (
            _conditions(table).get("Reachable", {}).get("reason") == "SecretNotFound"
            and policy.get("phase") == "Invalid"
            and _conditions(_status(kmock, (TABLES, "other"))).get("Compacting")
        )
        if done and "metrics" not in seen:
            seen["metrics"] = metrics_text()
            seen["at"] = time.monotonic()
        # keep ticking a while (about 8 observe intervals): nothing may be said twice
        return "at" in seen and time.monotonic() - seen["at"] > 8

    assert await operate_until(kmock, said, timeout=120), (
        _status(kmock, (TABLES, "events")),
        _status(kmock, (COMPACTION, "never")),
    )
    table = _status(kmock, (TABLES, "events"))
    conds = _conditions(table)
    assert table["phase"] == "Unreachable"
    assert conds["Reachable"]["status"] == "False"
    assert "Secret default/lake-creds" in conds["Reachable"]["message"]
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "SecretNotFound")
    assert conds["Compacting"]["reason"] == "SecretNotFound"  # not "no policy applies"
    (event,) = _events(kmock, "SecretNotFound")
    assert event["type"] == "Warning" and "lake-creds" in event["message"]
    ready = 'txntable_table_ready{namespace="default",reason="SecretNotFound",table="events"} 0.0'
    assert ready in seen["metrics"]

    policy = _status(kmock, (COMPACTION, "never"))
    ready_c = _conditions(policy)["Ready"]
    assert ready_c["status"] == "False" and ready_c["reason"] == "InvalidSpec"
    assert "never fires" in ready_c["message"]
    found = _events(kmock, "InvalidSpec")
    assert len(found) == 1, [(e["involvedObject"], e["message"]) for e in found]
    (invalid,) = found
    assert invalid["type"] == "Warning" and "never fires" in invalid["message"]
    compacting = _conditions(_status(kmock, (TABLES, "other")))["Compacting"]
    assert compacting["reason"] == "InvalidSpec" and "never fires" in compacting["message"]
    assert _status(kmock, (TABLES, "other"))["phase"] == "Degraded"
