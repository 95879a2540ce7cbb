"""Commit events: a new commit wakes its table's observation within seconds; polling stays.

Polling every table every ``observeInterval`` costs a log listing per table per interval and
still leaves a burst of small commits waiting up to that interval for compaction. Where the
storage can tell us that the log grew, ``CommitEvents`` turns that into a prompt, debounced
wake-up of the one table concerned; polling every ``observeInterval`` stays as the fallback and
the safety net (an event lost is a commit seen at the next poll, never a commit missed).

Two sources (docs/observation.md):

* **LogProbe**, local-disk tables: every ``probe_interval`` one existence check (a ``stat``) of
  the next commit file ``_delta_log/<v+1>.json`` per table, for at most ``PROBE_BUDGET``
  tables a round (more are checked in turn); a hit walks forward through the commits that
  followed. It needs no dependency and, unlike inotify, sees commits written by
  other hosts on a network file system (an NFS or CephFS volume shared by writer pods), which
  inotify never reports; a ``stat`` of an absent name is cheaper than the listing a poll does.
* **SQS**, S3 tables that name a queue in ``spec.notifications.sqsQueueUrl``: the bucket's
  ``s3:ObjectCreated`` notifications for ``_delta_log/`` arrive there (``sqs_source``); one
  long-polling reader per queue serves every table that names it.

Every event passes a debounce per table: the wake-up comes once the table's events have been
quiet for ``debounce`` seconds, or ``MAX_DELAY_FACTOR * debounce`` after the first of them in a
steady stream, so a burst of 50 commits is one observation. What each table's observation runs
on, events or polling and why, is ``status()`` (status.observation, a metric). Nothing here
imports Kopf: the Kopf handlers and ``txntable run --local`` pass their own ``on_wake``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from txntable.api.table import EventSource, ObservationMode, ObservationStatus
from txntable.engine import LOG_DIR
from txntable.handlers.sqs_source import SqsLike, SqsQueue

log = logging.getLogger(__name__)

#: A steady stream of commits is observed at least every this many debounce periods.
MAX_DELAY_FACTOR = 10
#: Commits a probe walks forward through in one round (the rest at the next round).
PROBE_WALK_LIMIT = 1000
#: Tables a probe round checks at most; more are checked in turn over several rounds. Every
#: table every second cost 39 ms of CPU a round at 10,000 tables (4% of a core) and up to a
#: seventh of the controller's samples at 5,000 under load, for wake-ups the interval's
#: observation would bring anyway; 2,000 a round keeps a local commit seen within 5 s there.
PROBE_BUDGET = 2000

OnWake = Callable[[str], None]
OnEvent = Callable[[EventSource], None]


def local_root(location: str) -> str | None:
    """The directory of a local-disk table (a path or a ``file:`` URI), else ``None``."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""
    if scheme in ("", "file", "local"):
        return unquote(parts.path) if scheme else location
    return None


def commit_path(root: str, version: int) -> str:
    return os.path.join(root, LOG_DIR, f"{version:020d}.json")


@dataclass
class _Watched:
    key: str
    location: str
    root: str | None  # local tables only
    queue_url: str | None
    #: the version the probe looks past; None until the table's version is known
    cursor: int | None = None


@dataclass
class _Pending:
    first: float
    last: float
    count: int = 1


@dataclass
class ProbeStats:
    """Counters the benchmark and the tests read: existence checks made, commits found."""

    probes: int = 0
    found: int = 0
    wakeups: int = 0
    events: dict[str, int] = field(default_factory=dict)


class CommitEvents:
    """Per-table commit signals in, debounced wake-ups out (``on_wake(key)``, from a thread)."""

    def __init__(
        self,
        on_wake: OnWake,
        *,
        probe_interval: float = 1.0,
        probe_budget: int = PROBE_BUDGET,
        debounce: float = 1.0,
        on_event: OnEvent | None = None,
        clock: Callable[[], float] = time.monotonic,
        sqs_factory: Callable[[str, Mapping[str, str]], SqsLike] | None = None,
    ) -> None:
        self.on_wake = on_wake
        self.on_event = on_event
        self.probe_interval = probe_interval
        self.probe_budget = max(1, probe_budget)
        self._probe_from = 0  # where the next round starts among the local tables
        self.debounce = debounce
        self.clock = clock
        self.stats = ProbeStats()
        self._sqs_factory = sqs_factory or _default_sqs_factory
        self._watched: dict[str, _Watched] = {}
        self._pending: dict[str, _Pending] = {}
        self._queues: dict[str, SqsLike] = {}
        self._lock = threading.Condition()
        self._stopped = threading.Event()
        self._signals = 0
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> CommitEvents:
        """Start the probe and debounce threads (daemons: they never hold the process up)."""
        targets = [self._debounce_loop]
        if self.probe_interval > 0:
            targets.append(self._probe_loop)
        for target in targets:
            thread = threading.Thread(target=target, name=f"commit-events-{target.__name__}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            self._lock.notify_all()
            queues = list(self._queues.values())
            self._queues.clear()
        for queue in queues:
            queue.close()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- tables --------------------------------------------------------------------------------
    def watch(
        self,
        key: str,
        location: str,
        *,
        version: int | None = None,
        sqs_queue_url: str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        """Follow ``key``'s log (idempotent; call after every observation with its version,
        which becomes the probe's cursor: commits it saw after that version wake it again)."""
        root = local_root(location)
        with self._lock:
            known = self._watched.get(key)
            if known is None or known.location != location or known.queue_url != sqs_queue_url:
                if known is not None and known.queue_url and known.queue_url != sqs_queue_url:
                    self._leave_queue(key, known.queue_url)
                known = self._watched[key] = _Watched(key, location, root, sqs_queue_url)
            if version is not None:
                known.cursor = version
            queue_url = sqs_queue_url if root is None else None
        if queue_url:
            self._join_queue(key, queue_url, location, dict(storage_options or {}))

    def unwatch(self, key: str) -> None:
        with self._lock:
            known = self._watched.pop(key, None)
            self._pending.pop(key, None)
        if known is not None and known.queue_url:
            self._leave_queue(key, known.queue_url)

    def status(self, key: str) -> ObservationStatus:
        """Whether ``key``'s commits wake it (and through what), or why it is polled."""
        with self._lock:
            known = self._watched.get(key)
            queue = self._queues.get(known.queue_url) if known and known.queue_url else None
        if known is None:
            return _polling("not watched for commit events")
        if known.root is not None:
            if self.probe_interval <= 0:
                return _polling("commit probing is off (TXNTABLE_EVENT_PROBE_INTERVAL_SECONDS=0)")
            return ObservationStatus(
                mode=ObservationMode.EVENTS,
                source=EventSource.LOG_PROBE,
                message=(
                    f"next commit file checked every {self.probe_interval:g}s, "
                    f"{self.probe_budget} tables a round in turn"
                ),
            )
        if known.queue_url is None:
            return _polling("no event source: spec.notifications.sqsQueueUrl is unset")
        if queue is None or queue.error is not None or not queue.healthy:
            why = queue.error if queue is not None and queue.error else "not read yet"
            return _polling(f"SQS queue {known.queue_url}: {why}"[:1024])
        return ObservationStatus(
            mode=ObservationMode.EVENTS,
            source=EventSource.SQS,
            message=f"S3 notifications from {known.queue_url}"[:1024],
        )

    # -- events --------------------------------------------------------------------------------
    def signal(self, key: str, source: EventSource) -> None:
        """A commit of ``key`` was seen (thread-safe); the wake-up follows the debounce."""
        now = self.clock()
        with self._lock:
            if key not in self._watched:
                return
            pending = self._pending.get(key)
            if pending is None:
                self._pending[key] = _Pending(now, now)
            else:
                pending.last, pending.count = now, pending.count + 1
            self.stats.events[source.value] = self.stats.events.get(source.value, 0) + 1
            self._signals += 1
            self._lock.notify_all()
        if self.on_event is not None:
            self.on_event(source)

    def due(self) -> tuple[list[str], float | None]:
        """Pop the tables whose debounce has passed; also the seconds until the next is due."""
        now = self.clock()
        ready: list[str] = []
        wait: float | None = None
        with self._lock:
            for key, pending in list(self._pending.items()):
                at = min(pending.last + self.debounce, pending.first + self._max_delay)
                if at <= now:
                    ready.append(key)
                    del self._pending[key]
                else:
                    wait = at - now if wait is None else min(wait, at - now)
            self.stats.wakeups += len(ready)
        return ready, wait

    @property
    def _max_delay(self) -> float:
        return MAX_DELAY_FACTOR * self.debounce

    def _debounce_loop(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                seen = self._signals
            ready, wait = self.due()
            for key in ready:
                try:
                    self.on_wake(key)
                except Exception:  # a failing wake-up leaves the table to its poll
                    log.exception("waking %s failed", key)
            with self._lock:
                if self._signals == seen and not self._stopped.is_set():  # no signal missed
                    self._lock.wait(timeout=wait if wait is not None else 1.0)

    # -- LogProbe ----------------------------------------------------------------------------
    def probe_once(self) -> list[str]:
        """One round of existence checks over the local tables (at most ``probe_budget``
        of them, the next ones in turn); returns the keys signalled."""
        with self._lock:
            targets = [
                (w.key, w.root, w.cursor)
                for w in self._watched.values()
                if w.root is not None and w.cursor is not None
            ]
        if len(targets) > self.probe_budget:  # this round's share, the next one after it
            start = self._probe_from % len(targets)
            targets = (targets[start:] + targets[:start])[: self.probe_budget]
            self._probe_from = start + self.probe_budget
        hits: list[str] = []
        for key, root, cursor in targets:
            assert root is not None and cursor is not None
            found = cursor
            checks = 0
            while checks < PROBE_WALK_LIMIT:
                checks += 1
                if not os.path.exists(commit_path(root, found + 1)):
                    break
                found += 1
            with self._lock:
                self.stats.probes += checks
                known = self._watched.get(key)
                if found > cursor and known is not None and known.cursor == cursor:
                    known.cursor = found
                    self.stats.found += found - cursor
            if found > cursor:
                hits.append(key)
                self.signal(key, EventSource.LOG_PROBE)
        return hits

    def _probe_loop(self) -> None:
        while not self._stopped.wait(self.probe_interval):
            try:
                self.probe_once()
            except Exception:  # never let one bad path stop every table's probe
                log.exception("commit probe round failed")

    # -- SQS -----------------------------------------------------------------------------------
    def _join_queue(self, key: str, queue_url: str, location: str, options: dict[str, str]) -> None:
        with self._lock:
            queue = self._queues.get(queue_url)
            if queue is None:
                queue = self._queues[queue_url] = self._sqs_factory(queue_url, options)
                queue.start(self.signal)
        queue.route(key, location, options)

    def _leave_queue(self, key: str, queue_url: str) -> None:
        with self._lock:
            queue = self._queues.get(queue_url)
        if queue is None:
            return
        if queue.unroute(key) == 0:
            with self._lock:
                self._queues.pop(queue_url, None)
            queue.close()


def _polling(message: str) -> ObservationStatus:
    return ObservationStatus(mode=ObservationMode.POLLING, message=message[:1024])


def _default_sqs_factory(queue_url: str, options: Mapping[str, str]) -> SqsLike:
    return SqsQueue(queue_url, options)
