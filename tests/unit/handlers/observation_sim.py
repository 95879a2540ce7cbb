"""The controller's observation schedule, run in virtual time: Kopf's timer and daemon around
the real handlers, minutes of firings, commit wake-ups and due times in milliseconds.

What runs is the controller's own code: the ``reconcile`` timer handler and the
``commit-events`` daemon coroutine of ``handlers.kopf_handlers``, ticking tables through the
real ``handlers.driver.Driver`` and its gate. What is stood in for:

* Kopf's timer task, by ``_kopf_timer``: the loop of ``kopf._core.engines.daemons._timer``
  (initial delay, then the handler, then a sleep of the interval after it ends, or to the next
  grid point when ``sharp``), with the ``initial_delay`` and ``sharp`` of the registered
  ``reconcile`` handler and the interval of the case (the chart's
  ``TXNTABLE_OBSERVE_INTERVAL_SECONDS``). Kopf starts the daemon and the timer of an object
  together; both run here in one event loop.
* the clock, by ``VirtualLoop``: an asyncio loop whose ``time()`` jumps to the next timer
  instead of sleeping, and which the driver reads too (its module's ``time``);
* the threads ticks run in (Kopf's executor for the timer, ``asyncio.to_thread`` for the
  daemon), by running the tick inline and then sleeping as long as it would have taken: the
  caller waits that long, the other tables do not (as many threads as tables);
* the tick itself, by ``Recorder``: it records when the table was observed (the start of the
  tick, when the log is read) and which compaction policies it saw, and says how long it took
  (the case's ``tick_seconds``: a tick with runs in flight follows them and takes longer);
* commit events, by calls of ``State.wake`` at the times the debounce would make them.

Nothing here reads the real clock, so the ages it measures are exact and the same on every
machine.
"""

from __future__ import annotations

import asyncio
import itertools
import selectors
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf
import pytest

from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.types import TxnTable, TxnTableStatus
from txntable.config import Config
from txntable.controller.memory import TableMemories
from txntable.controller.tick import Tick
from txntable.handlers import driver as driver_module
from txntable.handlers import kopf_handlers
from txntable.handlers.driver import Driver
from txntable.handlers.status_writer import MemoryStatus, StatusWriter

NAMESPACE = "default"


#: loop iterations at one virtual instant that mean something polls in a loop (a daemon that
#: waits 0 s again and again would hang the test instead of failing it)
SPIN_LIMIT = 20_000


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that never sleeps: with nothing ready, the loop's clock jumps ahead by the
    timeout the loop asked to wait (up to its next timer)."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._virtual = loop
        self._still = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout:
            self._virtual.now += timeout
            self._still = 0
        else:
            self._still += 1
            if self._still > SPIN_LIMIT:
                raise SpinError(f"the loop spins at {self._virtual.now} s (virtual)")
        return ready


class SpinError(RuntimeError):
    """Something in the loop polls without ever letting virtual time pass."""


class VirtualLoop(asyncio.SelectorEventLoop):
    """An asyncio loop in virtual time (seconds from 0)."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.now


class _VirtualTime:
    """What the driver's module sees as ``time``: the loop's clock."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop

    def monotonic(self) -> float:
        return self._loop.now


class _Stopped:
    """Kopf's ``stopped`` flag of a daemon."""

    def __init__(self) -> None:
        self.flag = False

    def __bool__(self) -> bool:
        return self.flag


@dataclass
class Table:
    """One TxnTable of a case: its interval, when commits wake it (after the debounce), and
    how long its ticks take (``tick_seconds(now)``; 50 ms by default)."""

    name: str
    interval: str
    wakes: Sequence[float] = ()
    tick_seconds: Callable[[float], float] = lambda _now: 0.05
    labels: dict[str, str] = field(default_factory=lambda: {"app": "lake"})
    #: (time, new spec.observeInterval): the table's spec is edited then
    edits: Sequence[tuple[float, str]] = ()
    #: its metadata.creationTimestamp (None: none; before the controller's start: found then)
    created: str | None = None

    @property
    def uid(self) -> str:
        return f"uid-{self.name}"

    def manifest(self) -> dict[str, Any]:
        return table_manifest(
            self.name,
            f"/nowhere/{self.name}",
            namespace=NAMESPACE,
            metadata={
                "uid": self.uid,
                "labels": dict(self.labels),
                "resourceVersion": "1",
                "generation": 1,
                **({"creationTimestamp": self.created} if self.created else {}),
            },
            observeInterval=self.interval,
        )


@dataclass
class Observed:
    """When a table was observed, and the compaction policies each observation saw."""

    at: list[float] = field(default_factory=list)
    policies: list[tuple[str, ...]] = field(default_factory=list)

    def max_age(self, end: float) -> float:
        """The longest the table went unobserved in [0, end]: from its creation at 0 to the
        first observation, between two, and from the last to the end."""
        points = [0.0, *self.at, end]
        return max(b - a for a, b in itertools.pairwise(points))

    def first_with(self, policy: str, since: float) -> float | None:
        """When the first observation at or after ``since`` saw ``policy``."""
        for at, seen in zip(self.at, self.policies, strict=True):
            if at >= since and policy in seen:
                return at
        return None


class Recorder:
    """Stands in for ``controller.tick.Operator`` under the driver (its ``memories``,
    ``metrics`` and ``reconcile``): records observations and how long the tick took."""

    def __init__(self, loop: VirtualLoop, tables: Sequence[Table]) -> None:
        self.memories = TableMemories()
        self.metrics = None
        self.observed: dict[str, Observed] = defaultdict(Observed)
        self._loop = loop
        self._seconds = {t.name: t.tick_seconds for t in tables}
        self._took = 0.0

    def reconcile(self, table: TxnTable, compaction: Sequence[Any], *_: Any, **__: Any) -> Tick:
        now = self._loop.now
        seen = self.observed[table.metadata.name]
        seen.at.append(now)
        seen.policies.append(tuple(sorted(p.metadata.name for p in compaction)))
        self._took += self._seconds[table.metadata.name](now)
        return Tick(TxnTableStatus(), (), (), 0)

    async def inline(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``func`` as a thread would run it: its tick now, its caller back when it ends."""
        self._took = 0.0
        result = func(*args, **kwargs)
        took, self._took = self._took, 0.0
        await asyncio.sleep(took)
        return result


def policy(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A CompactionPolicy selecting tables by ``labels`` (never due: it launches nothing)."""
    return compaction_policy_manifest(
        name,
        namespace=NAMESPACE,
        metadata={"uid": f"p-{name}"},
        tableSelector={"matchLabels": labels},
        triggers={"smallFiles": 100000},
    )


@dataclass
class Run:
    """What a simulated run of the controller saw."""

    observed: dict[str, Observed]
    seconds: float
    #: how many times each table's spec failed to parse in a tick (``_write_invalid``)
    invalid_writes: int = 0

    def max_age(self, name: str) -> float:
        return self.observed[name].max_age(self.seconds)


def _timer_handler() -> Any:
    """The registered ``reconcile`` timer (its ``initial_delay`` and ``sharp``)."""
    registry = kopf.get_default_registry()
    found = [h for h in registry._spawning.get_all_handlers() if h.id == "reconcile"]
    assert len(found) == 1, found
    return found[0]


async def _kopf_timer(
    loop: VirtualLoop, interval: float, call: Callable[[], Coroutine[Any, Any, Any]]
) -> None:
    """Kopf's timer task for one object (``kopf._core.engines.daemons._timer``)."""
    handler = _timer_handler()
    await asyncio.sleep(handler.initial_delay or 0)
    while True:
        started = loop.time()
        await call()  # the handler in Kopf's executor
        if handler.sharp:
            await asyncio.sleep(interval - (loop.time() - started) % interval)
        else:
            await asyncio.sleep(interval)


def simulate(
    monkeypatch: pytest.MonkeyPatch,
    tables: Sequence[Table],
    *,
    timer: float,
    seconds: float,
    policies: Sequence[tuple[float, dict[str, Any]]] = (),
    daemons: bool = True,
) -> Run:
    """Run the controller's timer and daemon over ``tables`` for ``seconds`` of virtual time,
    Kopf's timer firing every ``timer`` seconds; each of ``policies`` (time, manifest) is
    created at its time. ``daemons=False``: the daemons are not running (the safety net)."""
    loop = VirtualLoop()
    monkeypatch.setattr(driver_module, "time", _VirtualTime(loop))
    monkeypatch.setattr(kopf, "event", lambda *_args, **_kwargs: None)
    invalid = [0]
    write_invalid = kopf_handlers._write_invalid

    def counted(*args: Any, **kwargs: Any) -> None:
        invalid[0] += 1
        write_invalid(*args, **kwargs)

    monkeypatch.setattr(kopf_handlers, "_write_invalid", counted)
    recorder = Recorder(loop, tables)
    monkeypatch.setattr(asyncio, "to_thread", recorder.inline)
    driver = Driver(recorder, StatusWriter(recorder.memories, MemoryStatus()))  # type: ignore[arg-type]
    state = kopf_handlers.State(Config(), driver)
    memo = kopf.Memo()
    memo.state = state
    compaction: dict[str, list[dict[str, Any]]] = {}
    indexes: dict[str, Any] = {
        "compaction_policies": compaction,
        "checkpoint_policies": {},
    }
    stopped = _Stopped()

    def create(manifest: dict[str, Any]) -> None:
        compaction.setdefault(NAMESPACE, []).append(manifest)

    def edit(raw: dict[str, Any], interval: str) -> None:
        raw["spec"]["observeInterval"] = interval
        raw["metadata"]["generation"] += 1  # as the API server does at an edit of the spec
        raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
        event = kopf_handlers.spec_changes(body=kopf.Body(raw), memo=memo)  # type: ignore[arg-type]
        loop.create_task(event)

    async def main() -> None:
        tasks: list[asyncio.Task[None]] = []

        def start(coroutine: Coroutine[Any, Any, None]) -> None:
            tasks.append(loop.create_task(coroutine))

        raws = [table.manifest() for table in tables]
        for raw in raws:  # the spec-changes handler indexes each before its daemon starts
            state.tables.put(raw)
        for table, raw in zip(tables, raws, strict=True):
            body = kopf.Body(raw)  # type: ignore[arg-type]

            def fire(body: kopf.Body = body) -> Coroutine[Any, Any, Any]:
                return recorder.inline(
                    kopf_handlers.reconcile, body=body, patch=kopf.Patch(), memo=memo, **indexes
                )

            start(_kopf_timer(loop, timer, fire))
            if daemons:
                start(kopf_handlers.commit_events(body=body, memo=memo, stopped=stopped, **indexes))
            for at in table.wakes:
                loop.call_at(at, state.wake, table.uid)
            for at, interval in table.edits:
                loop.call_at(at, edit, raw, interval)
        for at, manifest in policies:
            loop.call_at(at, create, manifest)
        await asyncio.sleep(seconds)
        stopped.flag = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return Run(dict(recorder.observed), seconds, invalid[0])
