"""What the controller remembers of each table between ticks: one record per table, one forget.

The controller keeps a few things per table from one tick to the next: the table's handle and
log summary (``controller.observe``), the next run's plan and the learnt throughput
(``controller.foresee``), what sizes its runs (``controller.foresee``), the finished runs
already recorded (``controller.run_records``), the steps held and changes announced
(``controller.holds``), what the driver needs (``handlers.driver``: its
lock, its commit-events waker, its last tick), its Secret's version (``handlers.secret_source``)
and the status last written (``handlers.status_writer``). Each of them was a dict keyed by the
table in its own module, each with its own ``forget``, and a table was forgotten from four
places; a leak waited for whoever added the next dict.

So, in the spirit of Kopf's ``ResourceMemory``: a ``TableMemory`` per table holds sub-records,
one per owner type, each defined and used by the module that owns it (``memory.of(key,
HeldSteps)``) and created on first use. ``TableMemories.forget(key)`` drops the whole record:
a sub-record added tomorrow is forgotten with the others without anyone remembering to.
Components whose per-table state lives with their own threads or registry (commit events,
metrics, the tally of runs in flight that every tick reads: ``controller.tick``) are told
through ``on_forget``, from the same call.

Thread-safety: without a lock. Finding and creating a record or a sub-record is one dict
``get`` or ``setdefault``, and the listings copy the dict in one call: each is atomic in
CPython (the GIL; keys are strings and types), so two threads making one table's record at
once get the same one. A lock here was the most contended thing in the controller: at 10,000
tables, during start-up, the event loop spent 22% of its time waiting for it and the tick
threads 23% (py-spy, sampling idle threads too), every tick taking it a dozen times while
another thread that held it waited for the GIL. A sub-record is used by the tick of its
table, which runs one at a time per table (the driver's lock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")

#: Called with the key and the record of a table just forgotten.
OnForget = Callable[[str, "TableMemory"], None]


class TableMemory:
    """One table's memory: its sub-records by owner type, and the name it is exported under."""

    __slots__ = ("_records", "name", "namespace")

    def __init__(self) -> None:
        self._records: dict[type, object] = {}
        #: the table's namespace and name once a tick saw them (metrics are labelled by them)
        self.namespace: str | None = None
        self.name: str | None = None

    def get(self, kind: type[T]) -> T:
        """The sub-record of type ``kind``, made with ``kind()`` on first use (two threads
        asking at once get the same one: ``setdefault`` keeps the first)."""
        found = self._records.get(kind)
        if found is None:
            found = self._records.setdefault(kind, kind())
        return cast(T, found)

    def peek(self, kind: type[T]) -> T | None:
        """The sub-record of type ``kind`` if one was made, else None (none is made)."""
        return cast("T | None", self._records.get(kind))

    def records(self) -> tuple[object, ...]:
        """Every sub-record made so far."""
        return tuple(self._records.values())


class TableMemories:
    """Every table's ``TableMemory`` by table key (``ObjectMeta.key``); ``forget`` is the one
    way a table is forgotten."""

    def __init__(self) -> None:
        self._tables: dict[str, TableMemory] = {}
        self._on_forget: list[OnForget] = []

    def recall(self, key: str) -> TableMemory:
        """The table's memory, made on first use."""
        found = self._tables.get(key)
        if found is None:
            found = self._tables.setdefault(key, TableMemory())
        return found

    def of(self, key: str, kind: type[T]) -> T:
        """The table's sub-record of type ``kind``, made on first use."""
        return self.recall(key).get(kind)

    def peek(self, key: str, kind: type[T]) -> T | None:
        """The table's sub-record of type ``kind`` if there is one (none is made)."""
        found = self._tables.get(key)
        return found.peek(kind) if found is not None else None

    def each(self, kind: type[T]) -> list[tuple[str, T]]:
        """(key, sub-record) of every table that has a sub-record of type ``kind``."""
        pairs = [(key, memory.peek(kind)) for key, memory in self.items()]
        return [(key, found) for key, found in pairs if found is not None]

    def on_forget(self, listener: OnForget) -> None:
        """Call ``listener(key, memory)`` whenever a table is forgotten."""
        self._on_forget.append(listener)

    def forget(self, key: str) -> None:
        """Forget everything kept of the table ``key`` (it was deleted, or is gone from the
        manifests): every sub-record, and what the ``on_forget`` listeners keep."""
        memory = self._tables.pop(key, None)
        for listener in self._on_forget:
            listener(key, memory if memory is not None else TableMemory())

    def __contains__(self, key: object) -> bool:
        return key in self._tables

    def keys(self) -> list[str]:
        return list(self._tables.copy())

    def items(self) -> list[tuple[str, TableMemory]]:
        """(key, memory) of every table remembered now."""
        return list(self._tables.copy().items())
