"""Which policy of each kind governs a table.

A table uses the policy it names; otherwise the policies whose selector matches its labels. Two
matching policies of one kind with no explicit choice is reported as a condition, never guessed
(architecture.md, "Custom resources").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

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


#: what decides a table's resolution: the policy it names (None: none) and its labels, sorted
TableKey = tuple[str | None, tuple[tuple[str, str], ...]]
#: what decides it of the policies: each one's name and selector, by name
Fingerprint = tuple[tuple[str, object], ...]


class GoverningPolicies:
    """``resolve``'s choice for many tables against one set of policies, remembered.

    Every policy's status tick asks, of every table of its namespace, whether the table resolves
    to it (``reconcile.policy_status``): resolving each table against every policy in each tick
    cost O(tables x policies) per tick and O(tables x policies²) per interval; on 2 cores 100
    CompactionPolicy ticks over 1,000 tables took 9.9 CPU-s, two thirds of a core at a 30 s
    interval with the CheckpointPolicies' ticks, and ten times that at 10,000 tables. The
    choice depends only on the table's policy reference and labels and on the policies' names
    and selectors, so it is kept per such table key, for the last ``capacity`` sets of policies
    (a policy edited makes a new set; the old one ages out). Thread-safe: Kopf runs policy
    ticks in several threads."""

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._sets: OrderedDict[tuple[str, Fingerprint], dict[TableKey, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def governing(
        self, policies: Sequence[CompactionPolicy | CheckpointPolicy], kind: str
    ) -> Callable[[TxnTable], str | None]:
        """For ``policies`` (one kind, one namespace): the name of the policy each table
        resolves to, None when none governs it."""
        named = sorted((p.metadata.name, _selector_key(p)) for p in policies)
        fingerprint = (kind, tuple(named))  # in any order: resolve's choice does not depend on it
        with self._lock:
            known = self._sets.get(fingerprint)
            if known is None:
                known = self._sets[fingerprint] = {}
                while len(self._sets) > self._capacity:
                    self._sets.popitem(last=False)
            else:
                self._sets.move_to_end(fingerprint)

        def name_of(table: TxnTable) -> str | None:
            key = _table_key(table, kind)
            if key in known:
                return known[key]
            chosen = resolve(table, cast(Sequence[Any], policies), kind).policy
            name = chosen.metadata.name if chosen is not None else None
            known[key] = name  # one dict item: atomic; a race computes the same name twice
            return name

        return name_of


def _table_key(table: TxnTable, kind: str) -> TableKey:
    spec = table.spec
    ref = spec.compaction_policy_ref if kind == "compaction" else spec.checkpoint_policy_ref
    return (ref.name if ref is not None else None, tuple(sorted(table.metadata.labels.items())))


def _selector_key(policy: CompactionPolicy | CheckpointPolicy) -> object:
    selector = policy.spec.table_selector
    if selector is None:
        return None
    return (
        tuple(sorted(selector.match_labels.items())),
        tuple((r.key, str(r.operator), r.values) for r in selector.match_expressions),
    )
