"""Who governs what in each namespace, computed once per change and shared by policy ticks.

Every policy's status tick needs, of its namespace's tables, the ones it governs
(``reconcile.policy_status.govern``). Each tick walking every table for itself made the
policies' ticks cost O(tables x policies) per interval: at 5,000 tables and 200 policies a
tenth of a core, 17 ms per tick (docs/benchmarks.md, scale_apiserver). ``GovernedViews`` keeps
one answer per (namespace, kind) with what it was computed from: the table bodies themselves
(compared by identity: each event of a table brings a new body; a fingerprint of their
resourceVersions cost a tenth of the steady CPU at 3,000 tables) and the name and selector of
every policy. A tick whose namespace is unchanged since reads it as it is; any change (a new
or edited table, a status write, a policy edited, added or deleted) makes the next tick
compute it again. Kopf-free: it reads plain bodies.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.reconcile.policy_status import Governed, govern

Policy = CompactionPolicy | CheckpointPolicy


class GovernedViews:
    """``govern``'s answer per (namespace, kind), kept until the namespace changes.
    Thread-safe: Kopf runs policy ticks in several threads; one computes, the others wait
    for its answer rather than compute it again."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, str], _Kept] = {}
        self._lock = threading.Lock()

    def governed(
        self,
        namespace: str,
        kind: str,
        bodies: Iterable[Mapping[str, Any]] | None,
        policies: Sequence[Policy],
        parse_tables: Callable[[Any], list[TxnTable]],
    ) -> Governed:
        """Who governs what among the tables of ``bodies`` (the namespace's TxnTable bodies),
        for the ``kind`` ``policies``; ``parse_tables`` turns ``bodies`` into tables."""
        listed = list(bodies or ())
        if not listed:  # nothing to keep: a namespace whose tables went keeps no view
            with self._lock:
                self._views.pop((namespace, kind), None)
            return govern((), policies, kind)
        selectors = tuple(sorted((p.metadata.name, _selector_key(p)) for p in policies))
        with self._lock:
            kept = self._views.get((namespace, kind))
            if kept is not None and kept.selectors == selectors and kept.same_bodies(listed):
                return kept.view
            view = govern(parse_tables(listed), policies, kind)
            self._views[(namespace, kind)] = _Kept(listed, selectors, view)
            return view


@dataclass(frozen=True, slots=True)
class _Kept:
    """A view and what it was computed from: the body objects themselves (every event of a
    table brings a new one, and keeping them keeps their identities from being reused) and
    the policies' names and selectors."""

    bodies: list[Mapping[str, Any]]
    selectors: tuple[tuple[str, object], ...]
    view: Governed

    def same_bodies(self, listed: list[Mapping[str, Any]]) -> bool:
        return len(listed) == len(self.bodies) and all(map(operator.is_, listed, self.bodies))


def _selector_key(policy: Policy) -> object:
    """What of a policy decides which tables it selects besides its name (``resolve``)."""
    selector = policy.spec.table_selector
    if selector is None:
        return None
    return (
        tuple(sorted(selector.match_labels.items())),
        tuple((r.key, str(r.operator), r.values) for r in selector.match_expressions),
    )
