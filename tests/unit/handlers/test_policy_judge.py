"""A policy whose spec does not validate is said Invalid by the event handler, once per
generation and reason: the event of its own status write must not bring another write (the
conditions' transition times are new at every attempt), and a valid policy is left alone."""

from __future__ import annotations

from typing import Any

import kopf

from tests.support.manifests import compaction_policy_manifest
from txntable.handlers import kopf_handlers


def _policy(generation: int, spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
    raw: dict[str, Any] = compaction_policy_manifest(
        "nightly",
        namespace="lake",
        metadata={
            "uid": "uid-nightly",
            "generation": generation,
            "resourceVersion": str(100 + generation + len(status or {})),
        },
        status=status,
        **spec,
    )
    return kopf.Body(raw)  # type: ignore[arg-type]


def _judged(body: Any) -> dict[str, Any]:
    patch = kopf.Patch()
    kopf_handlers.judge_compaction_policy(body=body, patch=patch, memo=kopf.Memo())
    return dict(patch.get("status") or {})


BAD = {"triggers": {"smallFiles": -3}}
GOOD = {"triggers": {"smallFiles": 10}}


def test_an_invalid_policy_is_said_invalid_once_per_generation() -> None:
    first = _judged(_policy(1, BAD))
    assert first["phase"] == "Invalid" and first["observedGeneration"] == 1
    reasons = {c["type"]: (c["status"], c["reason"]) for c in first["conditions"]}
    assert reasons == {"SpecValid": ("False", "InvalidSpec"), "Ready": ("False", "InvalidSpec")}
    assert "smallFiles" in first["conditions"][0]["message"]

    assert _judged(_policy(1, BAD, first)) == {}  # the event of its own write
    again = _judged(_policy(2, BAD, first))  # edited, still invalid: the new generation
    assert again["observedGeneration"] == 2


def test_a_valid_or_deleted_policy_is_left_alone() -> None:
    assert _judged(_policy(1, GOOD)) == {}
    gone = _policy(1, BAD)
    gone["metadata"]["deletionTimestamp"] = "2026-12-03T08:00:00Z"
    assert _judged(gone) == {}
