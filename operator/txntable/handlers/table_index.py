"""The controller's own index of TxnTable bodies by namespace, instead of a Kopf index.

Kopf holds back the handlers of every object until all of its indexes are filled, and for
each object of an indexed kind it makes a toggle of one ``asyncio.Condition`` and drops it
once the object is indexed, each time waking every object already waiting: at start-up with
N tables that is O(N²) wake-ups, a quarter of the controller's CPU in its first 150 s with
3,000 tables (py-spy, docs/benchmarks.md, scale_apiserver). With no Kopf index on TxnTables
Kopf makes no toggle per table. The ``spec-changes`` event handler, which Kopf calls for every
event of a table before it starts the table's daemon and timer, fills this index instead.

What Kopf's index also gave was completeness: handlers ran only once every table was listed.
Two readers need it. A policy's status counts the tables it governs, and the start-up spread
paces the tables found at start. So the startup handler counts the tables once, with one list
request of one item whose ``remainingItemCount`` gives the total. The index is ``complete``
once it holds that many, or after ``deadline`` (tables deleted since the count never arrive).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any


class TableIndex:
    """TxnTable bodies by namespace and uid. Thread-safe: the event loop puts and drops, the
    policies' ticks read from Kopf's threads."""

    def __init__(self, expected: int | None = None, deadline: float | None = None) -> None:
        #: how many tables the startup count found (None: unknown; complete at the deadline,
        #: or at once without one)
        self.expected = expected
        #: monotonic time after which the index counts as complete whatever it holds
        self._deadline = deadline
        self._by_namespace: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def put(self, body: Mapping[str, Any]) -> None:
        """Keep the newest ``body`` of its table."""
        namespace, uid = _where(body)
        with self._lock:
            tables = self._by_namespace.setdefault(namespace, {})
            self._size += uid not in tables
            tables[uid] = body

    def drop(self, body: Mapping[str, Any]) -> None:
        """Forget the table of ``body`` (deleted)."""
        namespace, uid = _where(body)
        with self._lock:
            tables = self._by_namespace.get(namespace)
            if tables is not None and tables.pop(uid, None) is not None:
                self._size -= 1
                if not tables:
                    del self._by_namespace[namespace]

    def bodies(self, namespace: str) -> list[Mapping[str, Any]]:
        """The bodies of ``namespace``'s tables, in the order they were first seen."""
        with self._lock:
            return list(self._by_namespace.get(namespace, {}).values())

    def all(self) -> list[Mapping[str, Any]]:
        """Every table's body, in every namespace."""
        with self._lock:
            return [body for tables in self._by_namespace.values() for body in tables.values()]

    def __len__(self) -> int:
        return self._size

    def complete(self) -> bool:
        """Whether every table found at start is in (or the deadline passed)."""
        if self._deadline is None or (self.expected is not None and self._size >= self.expected):
            return True
        return time.monotonic() >= self._deadline


def _where(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("uid") or meta.get("name"))


def count_tables(
    api: Any, group: str, version: str, plural: str, namespaces: list[str]
) -> int | None:
    """How many TxnTables there are (in ``namespaces``, else in the cluster): one list request
    of one item per namespace, whose ``remainingItemCount`` says how many more there are; None
    when a page has more but does not say how many. Raises what the client raises."""
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(api)
    pages: list[dict[str, Any]] = (
        [
            custom.list_namespaced_custom_object(group, version, ns, plural, limit=1)
            for ns in namespaces
        ]
        if namespaces
        else [custom.list_cluster_custom_object(group, version, plural, limit=1)]
    )
    total = 0
    for page in pages:
        meta = page.get("metadata") or {}
        more = meta.get("remainingItemCount")
        if more is None and meta.get("continue"):
            return None
        total += len(page.get("items") or ()) + int(more or 0)
    return total
