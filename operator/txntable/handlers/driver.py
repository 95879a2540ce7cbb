"""One table's tick, for every caller: the Kopf timer, the commit-events daemon, local mode.

``Operator.reconcile`` (``controller.tick``) is the tick itself; around it every caller needs
the same things, and two copies of them (the Kopf handlers' and ``txntable run --local``'s) had
already drifted apart (local mode watched commit events with other storage options, gated
ticks its own way and kept statuses its own way). ``Driver.tick`` does them once:

1. the gate: a table ticks when its next observation is due (``interval`` after the start of
   its last tick, whoever made it) or when it was woken (a commit, a changed spec); when the
   next observation is due is the commit-events daemon's schedule (``until_due``);
2. the table's lock (the timer and the daemon of one table never tick it at once);
3. the table's credentials from an injected source (``handlers.secret_source`` in the cluster;
   none in local mode), a source that fails being reported on the table;
4. the tick, registered with the liveness check (``handlers.liveness``) and timed by the
   metrics (the operator counts the other tables' runs toward the limit itself: ``RunsInFlight``);
5. after a storage failure, the credentials read again at the next tick;
6. the commit-events watch (``handlers.commit_events``), with the storage options the tick used,
   and the observation mode it reports put in the status;
7. the tick's Events handed to the caller's sink (``kopf.event`` in the cluster, the printer in
   local mode), and its status to the one status writer (``handlers.status_writer``).

Kopf-free: what Kopf gives (bodies, indexes, the memo) stays in the Kopf glue (``kopf_*``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Protocol

from txntable.api.conditions import ConditionStatus, ConditionType, Event, Reason
from txntable.api.errors import InvalidSpecError
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable, TxnTableStatus
from txntable.controller.tick import Operator, Tick
from txntable.engine import pause_point
from txntable.handlers.commit_events import CommitEvents
from txntable.handlers.liveness import Liveness
from txntable.handlers.secret_cache import SecretUnavailable
from txntable.handlers.status_writer import Current, StatusWriter
from txntable.reconcile.status import Failure

log = logging.getLogger(__name__)

#: Where a tick's Events go (``kopf.event`` on the object, or local mode's printer).
EventSink = Callable[[Event], None]
#: an observation this close to its due time counts as due (see ``_due``)
EARLY_SECONDS = 0.001
#: how fast the first observations of the tables found at start-up come, at most (on average:
#: ``first_observation_delay``)
FIRST_OBSERVATIONS_PER_SECOND = 20.0


@dataclass
class Driven:
    """One table's sub-record of the driver (``controller.memory``)."""

    #: held while the table is ticked (the timer and the commit-events daemon)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: when its last tick started (monotonic seconds), None before the first: an observation
    #: is due ``interval`` after it, whatever made it (a timer firing, a commit, a due time)
    last_tick: float | None = None
    #: before its first tick, when that is due (monotonic seconds; None: at once): a table
    #: found at start-up waits its phase (``first_observation_delay``)
    first_due: float | None = None
    #: the observe interval the table was last asked to tick with (its spec.observeInterval):
    #: the daemon reads the next due time without parsing the table again
    interval: float = 0.0
    #: the metadata.generation of the spec ``interval`` came from: a firing of the timer that
    #: reads another one parses the table instead of trusting the gate (``due``)
    ticked_generation: int | None = None
    #: the object's metadata.generation its daemon knows: a new one wakes the daemon
    generation: int | None = None
    #: how its commit-events daemon is woken (the Kopf daemon's loop and event)
    waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None


@dataclass(frozen=True, slots=True)
class Policies:
    """The policies of the table's namespace, and those that do not validate (per kind,
    ``compaction``/``checkpoint``: name -> why)."""

    compaction: Sequence[CompactionPolicy]
    checkpoint: Sequence[CheckpointPolicy]
    invalid: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


class Credentials(Protocol):
    """A source of tables' storage credentials (``handlers.secret_source``)."""

    def options(self, key: str, table: TxnTable) -> dict[str, str]:
        """The table's storage options from its credentials; raises ``SecretUnavailable``."""
        ...

    def storage_failed(self, table: TxnTable) -> None:
        """The table's storage failed: its credentials may be stale."""
        ...


@dataclass
class Driver:
    """Ticks tables for the Kopf handlers and for local mode, the same way."""

    operator: Operator
    writer: StatusWriter
    credentials: Credentials | None = None
    #: the commit-events watches (set now or later); a table forgotten is no longer watched
    events: CommitEvents | None = None
    liveness: Liveness | None = None

    def __post_init__(self) -> None:
        self.operator.memories.on_forget(self._unwatch)

    def _unwatch(self, key: str, memory: object) -> None:
        """A table forgotten (``TableMemories.on_forget``) is no longer watched for commits."""
        del memory
        if self.events is not None:
            self.events.unwatch(key)

    def due(self, key: str, interval: float | None = None, generation: int | None = None) -> bool:
        """Whether ``key`` would tick now without being woken: it never ticked, or ``interval``
        (by default the one it was last asked to tick with) has passed since its last tick, or
        ``generation`` (the object's, when given) is not the one that interval came from."""
        driven = self.operator.memories.peek(key, Driven)
        if driven is None:
            return True
        if generation is not None and generation != driven.ticked_generation:
            return True
        return _due(driven, driven.interval if interval is None else interval, time.monotonic())

    def until_due(self, key: str) -> float | None:
        """Seconds until ``key``'s next observation is due (0 when it is): its last tick's start
        plus the interval it was last asked to tick with; before its first tick, until its
        first is due (``hold_first``), None when that is at once."""
        driven = self.operator.memories.peek(key, Driven)
        if driven is None:
            return None
        if driven.last_tick is None:
            due = driven.first_due
            return None if due is None else max(0.0, due - time.monotonic())
        return max(0.0, driven.last_tick + max(driven.interval, 0) - time.monotonic())

    def hold_first(self, key: str, delay: float) -> None:
        """Make ``key``'s first observation due ``delay`` seconds from now (unless it has
        ticked): the timer's and the daemon's ticks wait for it; a wake-up does not."""
        driven = self.operator.memories.of(key, Driven)
        if driven.last_tick is None and delay > 0:
            driven.first_due = time.monotonic() + delay

    def last_tick(self, key: str) -> float | None:
        """When ``key`` last ticked (monotonic seconds), None if never."""
        driven = self.operator.memories.peek(key, Driven)
        return driven.last_tick if driven is not None else None

    def tick(
        self,
        table: TxnTable,
        policies: Policies,
        current: Current,
        *,
        interval: float,
        woken: bool,
        sink: EventSink,
        wanted: Callable[[], bool] | None = None,
    ) -> Tick | None:
        """Tick ``table`` unless it ticked less than ``interval`` seconds ago and was not
        ``woken``; write its status if it changed (``current``: what the caller read of it)
        and the caller still ``wanted`` it (a Kopf daemon told to stop while the tick ran:
        its table is being deleted or the controller is stopping, and the timer writes).
        Returns the tick (its status with the observation mode), None when the gate held."""
        started = time.monotonic()
        key = table.metadata.key
        driven = self.operator.memories.of(key, Driven)
        # the interval is remembered even when the gate holds: the daemon's next due time
        # follows a changed spec.observeInterval at once (and it never waits on a stale one)
        driven.interval = interval
        driven.ticked_generation = table.metadata.generation
        if not woken and not _due(driven, interval, started):
            return None  # at once: a timer firing during the daemon's tick holds no thread
        with driven.lock:
            now = time.monotonic()
            if not woken and not _due(driven, interval, now):
                return None
            driven.last_tick = now
            pause_point("controller:tick")  # tests: the table is deleted while it ticks
            table = self._from_newest(table, key, current)
            tick = self._tick(table, policies, key)
            for event in tick.events:
                sink(event)
            meta = table.metadata
            namespace = meta.namespace or "default"
            if wanted is not None and not wanted():
                return tick
            self.writer.write(key, namespace, meta.name, current, tick.status.to_status())
        log.debug("ticked %s in %.3fs (woken: %s)", key, time.monotonic() - started, woken)
        return tick

    def _from_newest(self, table: TxnTable, key: str, current: Current) -> TxnTable:
        """``table`` starting from the newest status known for it, asked under the table's
        lock. The caller read ``current`` before it waited for the lock, so a write of the
        tick it waited for (the daemon's while the timer waited, or a slow tick whose next one
        fell due meanwhile) is not in it; judged against it, every condition would look new,
        with a new transition time, and the same status would be written a second time (under
        load at start, six of 300 idle tables). When the body lags behind an earlier write,
        the same applies (``StatusWriter.newest``)."""
        newest = self.writer.newest(key, current)
        if newest is current.status:
            return table
        try:
            return replace(table, status=TxnTableStatus.from_dict(dict(newest)))
        except InvalidSpecError as exc:  # a status the server kept that we cannot read back
            log.debug("the newest status of %s does not parse (%s): the body's is used", key, exc)
            return table

    def _tick(self, table: TxnTable, policies: Policies, key: str) -> Tick:
        operator = self.operator
        failure, options = None, {}
        if self.credentials is not None:
            try:
                options = self.credentials.options(key, table)
            except SecretUnavailable as exc:  # reported on the table, asked for after a back-off
                reason = Reason.SECRET_NOT_FOUND if exc.missing else Reason.SECRET_UNREADABLE
                failure = Failure(reason, str(exc))
        if self.liveness is not None:
            self.liveness.begin(key, time.monotonic())
        try:
            with operator.metrics.timed("table") if operator.metrics else nullcontext():
                tick = operator.reconcile(
                    table,
                    policies.compaction,
                    policies.checkpoint,
                    storage_options=options,
                    failure=failure,
                    invalid_policies=policies.invalid,
                )
        finally:
            if self.liveness is not None:
                self.liveness.end(key, time.monotonic())
        if self.credentials is not None and _storage_failed(tick.status):
            self.credentials.storage_failed(table)  # re-read credentials at the next tick
        if self.events is None:
            return tick
        return replace(tick, status=self._observed(table, key, tick.status, options))

    def _observed(
        self, table: TxnTable, key: str, status: TxnTableStatus, options: Mapping[str, str]
    ) -> TxnTableStatus:
        """``status`` with its observation mode, after telling the commit events the version."""
        assert self.events is not None
        notifications = table.spec.notifications
        self.events.watch(
            key,
            table.spec.location,
            version=status.version,
            sqs_queue_url=notifications.sqs_queue_url if notifications else None,
            storage_options=dict(table.spec.storage.options) | dict(options),
        )
        observed = replace(status, observation=self.events.status(key))
        metrics = self.operator.metrics
        if metrics is not None:
            namespace = table.metadata.namespace or "default"
            metrics.observation_mode(namespace, table.metadata.name, observed.observation)
        return observed


def _due(driven: Driven, interval: float, now: float) -> bool:
    """Whether the table's next observation is due at ``now``: ``interval`` after its last,
    give or take ``EARLY_SECONDS``. The daemon sleeps until then on asyncio's clock, which
    fires a timer up to its resolution early; without the allowance it would find the table
    not yet due by a hair and go round again, in a loop of zero-second waits."""
    if driven.last_tick is None:
        return driven.first_due is None or driven.first_due - now <= EARLY_SECONDS
    return driven.last_tick + max(interval, 0) - now <= EARLY_SECONDS


def first_observation_delay(key: str, interval: float, tables: int) -> float:
    """How long a table the controller found at start-up waits for its first observation: its
    phase (a hash of ``key``, fixed for the table) of the spread, which is the time
    ``FIRST_OBSERVATIONS_PER_SECOND`` takes for the ``tables`` found, at most ``interval``.

    Every table found at start-up was due at once: their first observations and status writes
    came in one burst, and as each next one is due an interval after the last, the burst came
    back every interval. Spread by phase, a few dozen tables still start within a second or
    two, thousands within one interval (each is observed within its interval, as always), and
    their later observations stay spread."""
    spread = min(max(interval, 0.0), tables / FIRST_OBSERVATIONS_PER_SECOND)
    phase = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    return phase * spread


def _storage_failed(status: TxnTableStatus) -> bool:
    """Whether the tick could not reach the table's storage (maybe stale credentials)."""
    return any(
        c.type == ConditionType.REACHABLE
        and c.reason == Reason.STORAGE_UNREACHABLE
        and c.status == ConditionStatus.FALSE
        for c in status.conditions
    )
