"""The per-table gauges, kept as one row of numbers per table and turned into samples at scrape.

A table's observation sets about twenty gauges (its version, files, bytes, readiness, failures
in a row per run kind, ...). As ``prometheus_client`` children, each of them is an object with
its own lock, value holder and label tuple: about 12 KB per idle table, a tenth of what the
controller kept per table at 1,000 tables (issue 30.4, ``bench/heap_probe``). Here a table costs
one list with a slot per gauge. Call sites keep the ``Gauge`` calls they use:
``gauge.labels(namespace, table, ...).set(value)`` and ``gauge.remove(...)``.

Thread-safe without a lock: ticks set values from worker threads while the metrics server
collects. A row is found or made with one dict ``get`` or ``setdefault``, a value is one list
item or dict item assignment, and a scrape copies the rows and cells in one call each: each is
atomic in CPython (the GIL). The tick of one table runs one at a time (the driver's lock), so
no two threads write one row's cells at once. A lock here was the second most contended thing
in the controller at 10,000 tables (a fifth of the tick threads' time waiting for it, py-spy),
and a scrape held it while it copied every row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample

#: a table's labels: (namespace, table)
Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class GaugeSpec:
    """One per-table gauge: its name, help text and labels (namespace and table first)."""

    name: str
    doc: str
    labels: tuple[str, ...]


class TableGaugeStore:
    """The values of every per-table gauge, one row per table. ``register`` puts one
    ``Collector`` per gauge on a registry: a scrape that asks for some families by name
    (``/metrics?name[]=...``) builds the samples of those alone."""

    def __init__(self, specs: Sequence[GaugeSpec]) -> None:
        self._specs = tuple(specs)
        #: (namespace, table) -> the table's labels dict (shared by its samples, scrape after
        #: scrape: the exposition reads them, never changes them), then one slot per spec: a
        #: float, or for a spec with labels beyond the table's, {the other label values:
        #: float}; None when the series is absent
        self._rows: dict[Key, list[Any]] = {}

    def register(self, registry: CollectorRegistry) -> None:
        """Register one collector per gauge on ``registry``."""
        for slot, spec in enumerate(self._specs):
            registry.register(_Family(self, slot, spec))

    def gauge(self, name: str) -> TableGauge:
        """The handle of the gauge called ``name``."""
        slot = next(i for i, spec in enumerate(self._specs) if spec.name == name)
        return TableGauge(self, slot, self._specs[slot].labels)

    def set(self, slot: int, values: tuple[str, ...], value: float) -> None:
        key, extra = (values[0], values[1]), values[2:]
        row = self._rows.get(key)
        if row is None:
            names = self._specs[slot].labels
            new = [{names[0]: key[0], names[1]: key[1]}, *([None] * len(self._specs))]
            row = self._rows.setdefault(key, new)
        if not extra:
            row[slot + 1] = float(value)
            return
        cell = row[slot + 1]
        if cell is None:
            cell = row[slot + 1] = {}
        cell[extra] = float(value)

    def remove(self, slot: int, values: tuple[str, ...]) -> None:
        """Drop one series; nothing when it is absent, as ``Gauge.remove``."""
        key, extra = (values[0], values[1]), values[2:]
        row = self._rows.get(key)
        cell = row[slot + 1] if row is not None else None
        if row is None or cell is None or (extra and extra not in cell):
            return
        if extra and len(cell) > 1:
            cell.pop(extra, None)
        else:
            row[slot + 1] = None

    def forget(self, key: Key) -> None:
        """Drop every series of the table ``key``."""
        self._rows.pop(key, None)

    def tables(self) -> int:
        """How many tables have a row."""
        return len(self._rows)

    def samples(self, slot: int) -> list[Sample]:
        """The samples of the gauge in ``slot``, as ``Gauge`` children would give them. Made
        here, not by ``add_metric``, which builds a label dict per sample: at 10,000 tables a
        scrape has 220,000 samples."""
        spec = self._specs[slot]
        rest = spec.labels[2:]
        cells = [  # the rows as they are now (one copy), each cell as it is now
            (row[0], c.copy() if isinstance(c, dict) else c)
            for row in list(self._rows.values())
            if (c := row[slot + 1]) is not None
        ]
        out: list[Sample] = []
        for labels, cell in cells:
            if isinstance(cell, dict):
                for extra, value in cell.items():
                    wider = {**labels, **dict(zip(rest, extra, strict=True))}
                    out.append(Sample(spec.name, wider, value, None))
            else:
                out.append(Sample(spec.name, labels, cell, None))
        return out


class _Family(Collector):
    """The collector of one per-table gauge of a ``TableGaugeStore``."""

    def __init__(self, store: TableGaugeStore, slot: int, spec: GaugeSpec) -> None:
        self._store, self._slot, self._spec = store, slot, spec

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The family without samples, for the registry's check of duplicate names."""
        yield GaugeMetricFamily(self._spec.name, self._spec.doc, labels=self._spec.labels)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._spec.name, self._spec.doc, labels=self._spec.labels)
        family.samples = self._store.samples(self._slot)
        yield family


class TableGauge:
    """One per-table gauge as its call sites use a ``prometheus_client`` ``Gauge``."""

    def __init__(self, store: TableGaugeStore, slot: int, labelnames: tuple[str, ...]) -> None:
        self._store = store
        self._slot = slot
        self._labelnames = labelnames

    def labels(self, *values: str) -> _Series:
        if len(values) != len(self._labelnames):
            raise ValueError(f"expected labels {self._labelnames}, got {values}")
        return _Series(self._store, self._slot, tuple(str(v) for v in values))

    def remove(self, *values: str) -> None:
        if len(values) != len(self._labelnames):  # as a Gauge: never a wider removal than asked
            raise ValueError(f"expected labels {self._labelnames}, got {values}")
        self._store.remove(self._slot, tuple(str(v) for v in values))


@dataclass(frozen=True, slots=True)
class _Series:
    store: TableGaugeStore
    slot: int
    values: tuple[str, ...]

    def set(self, value: float) -> None:
        self.store.set(self.slot, self.values, value)
