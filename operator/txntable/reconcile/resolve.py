"""Which policy of each kind governs a table.

A table uses the policy it names; otherwise the policies whose selector matches its labels. Two
matching policies of one kind with no explicit choice is reported as a condition, never guessed
(architecture.md, "Custom resources").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from txntable.api.conditions import Reason
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable

P = TypeVar("P", CompactionPolicy, CheckpointPolicy)


@dataclass(frozen=True, slots=True)
class Resolution(Generic[P]):
    """The governing policy (or None) and why."""

    policy: P | None
    reason: Reason
    message: str


def resolve(
    table: TxnTable,
    policies: Sequence[P],
    kind: str,
    invalid: Mapping[str, str] | None = None,
) -> Resolution[P]:
    """Pick the ``kind`` policy for ``table`` among ``policies`` of the table's namespace
    (``invalid``: the ones that do not validate, by name, with why)."""
    spec = table.spec
    ref = spec.compaction_policy_ref if kind == "compaction" else spec.checkpoint_policy_ref
    if ref is not None:
        named = [p for p in policies if p.metadata.name == ref.name]
        if not named and invalid and ref.name in invalid:
            return Resolution(
                None,
                Reason.INVALID_SPEC,
                f"{kind} policy {ref.name} is invalid: {invalid[ref.name]}",
            )
        if not named:
            return Resolution(
                None, Reason.POLICY_NOT_FOUND, f"{kind} policy {ref.name!r} does not exist"
            )
        return Resolution(named[0], Reason.POLICY_MATCHED, f"{kind} policy {ref.name} (by name)")
    matching = [
        p
        for p in policies
        if p.spec.table_selector is not None
        and p.spec.table_selector.matches(table.metadata.labels)
    ]
    if not matching:
        return Resolution(None, Reason.NO_POLICY, f"no {kind} policy selects this table")
    if len(matching) > 1:
        names = ", ".join(sorted(p.metadata.name for p in matching))
        return Resolution(
            None,
            Reason.POLICY_CONFLICT,
            f"{kind} policies {names} all select this table; name one in spec.{kind}PolicyRef",
        )
    chosen = matching[0]
    return Resolution(chosen, Reason.POLICY_MATCHED, f"{kind} policy {chosen.metadata.name}")
