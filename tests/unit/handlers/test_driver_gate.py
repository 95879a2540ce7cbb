"""The driver's gate: a table ticks when its next observation is due or when it is woken,
and a caller the gate turns away is turned away at once.

The schedule itself (when the timer and the daemon come, and the longest a table then goes
unobserved) is ``test_observed_on_time``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.manifests import table_manifest
from txntable.api.types import TxnTable, TxnTableStatus
from txntable.controller.memory import TableMemories
from txntable.controller.tick import Tick
from txntable.handlers.driver import Driver, Policies
from txntable.handlers.status_writer import Current, MemoryStatus, StatusWriter

_MANIFEST = table_manifest(
    "held", "/nowhere/held", metadata={"uid": "uid-held"}, observeInterval="30s"
)


def test_a_firing_during_a_tick_returns_at_once_instead_of_waiting_for_it() -> None:
    """A timer firing while the daemon ticks the table finds it not due (the tick started
    the interval) and returns without waiting for the table's lock: it holds none of Kopf's
    executor threads for the length of someone else's tick. Main's gate looked only under
    the lock, so a slow tick (a big inline checkpoint) held a Kopf thread per firing."""
    entered, release = threading.Event(), threading.Event()

    class Held:
        memories = TableMemories()
        metrics = None

        def reconcile(self, *_: Any, **__: Any) -> Tick:
            entered.set()
            release.wait(30)
            return Tick(TxnTableStatus(), (), (), 0)

    driver = Driver(Held(), StatusWriter(Held.memories, MemoryStatus()))  # type: ignore[arg-type]
    table = TxnTable.from_manifest(_MANIFEST)
    policies = Policies((), ())
    tick = threading.Thread(
        target=driver.tick,
        args=(table, policies, Current.of({})),
        kwargs={"interval": 30.0, "woken": True, "sink": lambda _e: None},
    )
    tick.start()
    try:
        assert entered.wait(30)
        results: list[object] = []
        firing = threading.Thread(
            target=lambda: results.append(
                driver.tick(
                    table,
                    policies,
                    Current.of({}),
                    interval=30.0,
                    woken=False,
                    sink=lambda _e: None,
                )
            )
        )
        firing.start()
        firing.join(10)  # a deadline against a hang, not a measurement
        held = firing.is_alive()
    finally:
        release.set()
        tick.join(30)
    assert not held and results == [None]


class _Clock:
    """The driver's ``time`` module, by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class _Quick:
    """An operator whose ticks are counted and take no time."""

    metrics = None

    def __init__(self) -> None:
        self.memories = TableMemories()
        self.ticks = 0

    def reconcile(self, *_: Any, **__: Any) -> Tick:
        self.ticks += 1
        return Tick(TxnTableStatus(), (), (), 0)


def test_the_next_observation_is_due_an_interval_after_the_last_whoever_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A woken tick starts the interval as a timer's does; the due time follows the interval
    of the latest call, a turned-away one included (an edited spec.observeInterval)."""
    from txntable.handlers import driver as driver_module

    clock = _Clock()
    monkeypatch.setattr(driver_module, "time", clock)
    quick = _Quick()
    driver = Driver(quick, StatusWriter(quick.memories, MemoryStatus()))  # type: ignore[arg-type]
    table = TxnTable.from_manifest(_MANIFEST)
    key = table.metadata.key

    def tick(*, woken: bool, interval: float = 30.0) -> bool:
        got = driver.tick(
            table,
            Policies((), ()),
            Current.of({}),
            interval=interval,
            woken=woken,
            sink=lambda _e: None,
        )
        return got is not None

    assert driver.until_due(key) is None and driver.due(key)
    assert tick(woken=False) and driver.until_due(key) == 30.0
    clock.now += 5
    assert tick(woken=True)  # a commit: observed, and the next one due 30 s from now
    clock.now += 29
    assert not tick(woken=False) and driver.until_due(key) == 1.0
    clock.now += 1
    assert driver.due(key) and tick(woken=False)
    clock.now += 10
    assert not tick(woken=False, interval=60.0)  # the spec now says 1m
    assert driver.until_due(key) == 50.0 and not driver.due(key)
    assert quick.ticks == 3
