"""The policy driver (``handlers.policy_driver``), without Kopf: a policy's status is judged and
written through the one status writer, only when it changed, from the newest status known; an
invalid policy is said Invalid once per generation and reason; a policy that becomes Invalid
for a reason only the controller sees is announced by one Warning Event; and what is kept of a
policy is forgotten when it is deleted (the judge handlers see its ``DELETED`` event)."""

from __future__ import annotations

import types
from typing import Any

import kopf

from tests.support.manifests import compaction_policy_manifest, table_manifest
from tests.support.status_server import Server
from txntable.api.conditions import Event
from txntable.api.types import CompactionPolicy
from txntable.controller.memory import TableMemories
from txntable.handlers.kopf_policies import judge_compaction_policy
from txntable.handlers.policy_driver import PolicyDriven, PolicyDriver
from txntable.handlers.status_writer import Current, StatusWriter, Written

UID = "uid-nightly"
BAD = {"triggers": {"smallFiles": -3}}
GOOD = {"triggers": {"smallFiles": 10}}
NEVER = {"triggers": {"schedule": "0 0 30 2 *"}}  # a date that never occurs


def _driver(store: Server | None = None) -> tuple[PolicyDriver, Server]:
    memories, store = TableMemories(), store or Server({})
    writer = StatusWriter(memories, store)
    return PolicyDriver(memories, {"compaction": writer, "checkpoint": writer}), store


def _policy(
    generation: int = 1, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta = {"uid": UID, "generation": generation, "resourceVersion": str(100 + generation)}
    return compaction_policy_manifest(
        "nightly", namespace="lake", metadata=meta, status=status, **(spec or GOOD)
    )


def _judged(driver: PolicyDriver, store: Server, body: dict[str, Any]) -> dict[str, Any]:
    before = len(store.patches)
    driver.judge("compaction", body)
    return store.patches[-1] if len(store.patches) > before else {}


def test_an_invalid_policy_is_said_invalid_once_per_generation() -> None:
    driver, store = _driver()
    first = _judged(driver, store, _policy(1, BAD))
    assert first["phase"] == "Invalid" and first["observedGeneration"] == 1
    reasons = {c["type"]: (c["status"], c["reason"]) for c in first["conditions"]}
    assert reasons == {"SpecValid": ("False", "InvalidSpec"), "Ready": ("False", "InvalidSpec")}
    assert "smallFiles" in first["conditions"][0]["message"]

    assert _judged(driver, store, _policy(1, BAD, first)) == {}  # the event of its own write
    again = _judged(driver, store, _policy(2, BAD, first))  # edited, still invalid
    assert again["observedGeneration"] == 2


def test_a_valid_or_deleted_policy_is_left_alone() -> None:
    driver, store = _driver()
    assert _judged(driver, store, _policy(1, GOOD)) == {}
    gone = _policy(1, BAD)
    gone["metadata"]["deletionTimestamp"] = "2026-12-03T08:00:00Z"
    memo = types.SimpleNamespace(state=types.SimpleNamespace(policies=driver, shards=None))
    judge_compaction_policy(body=kopf.Body(gone), memo=memo)  # type: ignore[arg-type]
    assert store.patches == []


def _tables() -> list[dict[str, Any]]:
    return [
        table_manifest(
            f"t{i}",
            namespace="lake",
            metadata={"uid": f"t{i}", "resourceVersion": "1"},
            compactionPolicyRef={"name": "nightly"},
        )
        for i in range(2)
    ]


def test_a_tick_writes_the_status_when_it_changed_from_the_newest_known() -> None:
    driver, store = _driver()
    body = _policy(1)
    policy = CompactionPolicy.from_manifest(body)
    view = driver.view(policy, [body], _tables())
    events: list[Event] = []
    status = driver.tick(policy, view, Current.of(body), sink=events.append)
    assert status.matched_table_count == 2 and list(status.matched_tables) == ["t0", "t1"]
    ((written,),) = [store.patches]
    assert written["matchedTableCount"] == 2 and written["phase"] == "Active"
    # the body Kopf hands the next tick still lacks that write: the newest known is the one
    # written, so nothing is written again (against the body, everything would look new)
    driver.tick(policy, view, Current.of(body), sink=events.append)
    assert len(store.patches) == 1 and events == []


def test_a_policy_that_becomes_invalid_is_announced_once() -> None:
    """Announced once, even while its status write is refused and every tick tries again
    (the status read never says it: the driver remembers what it announced)."""
    refusing = Server({})
    refusing.refuse = True
    driver, _ = _driver(refusing)
    body = _policy(1, NEVER)
    policy = CompactionPolicy.from_manifest(body)
    view = driver.view(policy, [body], _tables())
    events: list[Event] = []
    for _ in range(3):
        status = driver.tick(policy, view, Current.of(body), sink=events.append)
    assert str(status.phase) == "Invalid" and refusing.status == {}
    ((event,),) = [events]
    assert event.type == "Warning" and str(event.reason) == "InvalidSpec"
    assert "schedule" in event.message
    driver.tick(
        CompactionPolicy.from_manifest(_policy(2)), view, Current.of(body), sink=events.append
    )
    driver.tick(policy, view, Current.of(body), sink=events.append)  # Invalid again: said again
    assert len(events) == 2


def test_a_deleted_policy_is_forgotten() -> None:
    """Before, the Invalid reasons announced stayed in a dict by policy uid for as long as the
    controller ran; now the policy's memory (its driver's record, its written status) goes
    when Kopf reports it deleted."""
    driver, _ = _driver()
    body = _policy(1, NEVER)
    policy = CompactionPolicy.from_manifest(body)
    driver.tick(policy, driver.view(policy, [body], ()), Current.of(body), sink=lambda _e: None)
    driven = driver.memories.peek(UID, PolicyDriven)
    assert driven is not None and driven.said is not None
    assert driver.memories.peek(UID, Written) is not None
    memo = types.SimpleNamespace(state=types.SimpleNamespace(policies=driver, shards=None))
    judge_compaction_policy(body=kopf.Body(body), memo=memo, type="DELETED")  # type: ignore[arg-type]
    assert UID not in driver.memories
    assert driver.memories.peek(UID, PolicyDriven) is None


def test_a_field_the_status_no_longer_has_is_removed() -> None:
    """A policy whose schedule was removed has no next schedule time: the tick's status is the
    whole status, so the time its schedule gave is deleted, not left to say a run is due."""
    driver, store = _driver()
    scheduled = _policy(1, {"triggers": {"schedule": "0 3 * * *"}})
    policy = CompactionPolicy.from_manifest(scheduled)
    driver.tick(policy, driver.view(policy, [scheduled], []), store.body(), sink=print)
    assert "nextScheduleTime" in store.status
    edited = _policy(2, {"triggers": {"smallFiles": 10}})
    policy = CompactionPolicy.from_manifest(edited)
    driver.tick(policy, driver.view(policy, [edited], []), store.body(), sink=print)
    assert "nextScheduleTime" not in store.status and store.status["observedGeneration"] == 2
