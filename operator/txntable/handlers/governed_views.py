"""Who governs what in each namespace, computed once per change and shared by policy ticks.

Every policy's status tick needs, of its namespace's tables, the ones it governs
(``reconcile.policy_status.govern``). Each tick walking every table for itself made the
policies' ticks cost O(tables x policies) per interval: at 5,000 tables and 200 policies a
tenth of a core, 17 ms per tick (docs/benchmarks.md, scale_apiserver). ``GovernedViews`` keeps
one answer per (namespace, kind) with what it was computed from: the (uid, resourceVersion) of
every table body and the name and selector of every policy. A tick whose namespace is unchanged
since reads it as it is; any change (a new or edited table, a status write, a policy edited,
added or deleted) makes the next tick compute it again. Kopf-free: it reads plain bodies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.reconcile.policy_status import Governed, govern

Policy = CompactionPolicy | CheckpointPolicy


class GovernedViews:
    """``govern``'s answer per (namespace, kind), kept until the namespace changes.
    Thread-safe: Kopf runs policy ticks in several threads; one computes, the others wait
    for its answer rather than compute it again."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, str], tuple[object, Governed]] = {}
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
        seen = (
            tuple(_version(body) for body in listed),
            tuple(sorted((p.metadata.name, _selector_key(p)) for p in policies)),
        )
        with self._lock:
            kept = self._views.get((namespace, kind))
            if kept is not None and kept[0] == seen:
                return kept[1]
            view = govern(parse_tables(listed), policies, kind)
            self._views[(namespace, kind)] = (seen, view)
            return view


def _version(body: Mapping[str, Any]) -> tuple[object, object]:
    meta = body.get("metadata") or {}
    return meta.get("uid") or meta.get("name"), meta.get("resourceVersion")


def _selector_key(policy: Policy) -> object:
    """What of a policy decides which tables it selects besides its name (``resolve``)."""
    selector = policy.spec.table_selector
    if selector is None:
        return None
    return (
        tuple(sorted(selector.match_labels.items())),
        tuple((r.key, str(r.operator), r.values) for r in selector.match_expressions),
    )
