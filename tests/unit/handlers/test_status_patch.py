"""The TxnTable status goes to the API server as a JSON merge patch (RFC 7386), where a missing
field keeps its old value: a field the new status no longer has must be sent as null, at any
depth, or ``status.plan`` of a table whose policy went away and ``status.conflicts.backOffUntil``
of an ended back-off would stay forever."""

from __future__ import annotations

from typing import Any

from txntable.handlers.status_writer import changed as _changed
from txntable.handlers.status_writer import merge_patch as _merge_patch


def _apply(target: Any, patch: Any) -> Any:
    """RFC 7386 as the API server applies it."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _apply(out.get(k), v)
    return out


CURRENT = {
    "phase": "Ready",
    "plan": {"planId": "aaa", "bins": 2, "note": "estimate"},
    "conflicts": {
        "runs": [{"runName": "r1"}],
        "percent": 75,
        "backOffUntil": "2026-11-25T10:00:00Z",
    },
    "conditions": [{"type": "Ready", "status": "True"}],
}


def test_fields_gone_from_the_new_status_are_deleted_at_any_depth() -> None:
    new = {
        "phase": "Ready",
        "plan": {"planId": "bbb", "bins": 1},
        "conflicts": {"runs": [{"runName": "r2"}], "percent": 10},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    patch = _merge_patch(CURRENT, new)
    assert _apply(CURRENT, patch) == new
    assert patch["plan"]["note"] is None and patch["conflicts"]["backOffUntil"] is None
    # once written, the same status is no change
    assert not _changed(new, _merge_patch(new, new))


def test_a_whole_field_gone_is_deleted() -> None:
    new = {"phase": "Ready", "conditions": CURRENT["conditions"]}
    patch = _merge_patch(CURRENT, new)
    assert patch["plan"] is None and patch["conflicts"] is None
    assert _changed(CURRENT, patch)
    assert _apply(CURRENT, patch) == new
    assert _merge_patch({}, new) == new
