"""The per-table gauges, kept as one row of numbers per table and turned into samples at scrape.

A table's observation sets about twenty gauges (its version, files, bytes, readiness, failures
in a row per run kind, ...). As ``prometheus_client`` children, each of them is an object with
its own lock, value holder and label tuple: about 12 KB per idle table, a tenth of what the
controller kept per table at 1,000 tables (issue 30.4, ``bench/heap_probe``). Here a table costs
one list with a slot per gauge. Call sites keep the ``Gauge`` calls they use:
``gauge.labels(namespace, table, ...).set(value)`` and ``gauge.remove(...)``.

Thread-safe: ticks set values from worker threads while the metrics server collects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

#: a table's labels: (namespace, table)
Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class GaugeSpec:
    """One per-table gauge: its name, help text and labels (namespace and table first)."""

    name: str
    doc: str
    labels: tuple[str, ...]


class TableGaugeStore(Collector):
    """The values of every per-table gauge, one row per table; a ``Collector`` of the
    registry it is registered on."""

    def __init__(self, specs: Sequence[GaugeSpec]) -> None:
        self._specs = tuple(specs)
        #: (namespace, table) -> one slot per spec: a float, or for a spec with labels beyond
        #: the table's, {the other label values: float}; None when the series is absent
        self._rows: dict[Key, list[Any]] = {}
        self._lock = threading.Lock()

    def gauge(self, name: str) -> TableGauge:
        """The handle of the gauge called ``name``."""
        slot = next(i for i, spec in enumerate(self._specs) if spec.name == name)
        return TableGauge(self, slot, self._specs[slot].labels)

    def set(self, slot: int, values: tuple[str, ...], value: float) -> None:
        key, extra = (values[0], values[1]), values[2:]
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = [None] * len(self._specs)
            if not extra:
                row[slot] = float(value)
                return
            cell = row[slot]
            if cell is None:
                cell = row[slot] = {}
            cell[extra] = float(value)

    def remove(self, slot: int, values: tuple[str, ...]) -> None:
        """Drop one series; nothing when it is absent, as ``Gauge.remove``."""
        key, extra = (values[0], values[1]), values[2:]
        with self._lock:
            row = self._rows.get(key)
            if row is None or row[slot] is None or (extra and extra not in row[slot]):
                return
            if extra and len(row[slot]) > 1:
                del row[slot][extra]
            else:
                row[slot] = None

    def forget(self, key: Key) -> None:
        """Drop every series of the table ``key``."""
        with self._lock:
            self._rows.pop(key, None)

    def tables(self) -> int:
        """How many tables have a row."""
        with self._lock:
            return len(self._rows)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples, for the registry's check of duplicate names."""
        for spec in self._specs:
            yield GaugeMetricFamily(spec.name, spec.doc, labels=spec.labels)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Every series as ``Gauge`` children would give them. The samples are made here, not
        by ``add_metric``, which builds a label dict per sample: at 10,000 tables a scrape has
        220,000 samples, and the dict of a table's two labels is one, shared by its gauges
        (samples are read, never changed, by the exposition)."""
        with self._lock:  # a copy, so that ticks are not held while the samples are built
            rows = [
                (key, [dict(c) if isinstance(c, dict) else c for c in row])
                for key, row in self._rows.items()
            ]
        shared: dict[tuple[str, str], dict[Key, dict[str, str]]] = {}  # by the label names
        for slot, spec in enumerate(self._specs):
            family = GaugeMetricFamily(spec.name, spec.doc, labels=spec.labels)
            names, rest = (spec.labels[0], spec.labels[1]), spec.labels[2:]
            by_table = shared.setdefault(names, {})
            samples = family.samples
            for key, row in rows:
                cell = row[slot]
                if cell is None:
                    continue
                if isinstance(cell, dict):
                    for extra, value in cell.items():
                        wider = {
                            names[0]: key[0],
                            names[1]: key[1],
                            **dict(zip(rest, extra, strict=True)),
                        }
                        samples.append(Sample(spec.name, wider, value, None))
                    continue
                labels = by_table.get(key)
                if labels is None:
                    labels = by_table[key] = {names[0]: key[0], names[1]: key[1]}
                samples.append(Sample(spec.name, labels, cell, None))
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
