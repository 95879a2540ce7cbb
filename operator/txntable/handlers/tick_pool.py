"""The threads that run the tables' ticks, a table's due observation before a first one.

The commit-events daemons hand their ticks to threads (a tick reads storage and writes the
status through a synchronous client). asyncio's default executor takes them in the order they
come: at start-up thousands of first observations queue at once, and a table observed early
in that queue waited behind all of them for its next observation. At 5,000 tables on two
cores the first observations took 84 s against a 30 s interval, and the largest gap between
two observations of a table was 61 s. ``TickPool`` runs the ticks of tables that were observed
before (due again, or woken by a commit or a spec change) ahead of first observations: those
fill the threads' spare time, and a table once observed keeps its interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: a tick of a table observed before (due again, or woken)
AGAIN = 0
#: a table's first observation
FIRST = 1


class TickPool:
    """A fixed number of threads taking ticks by priority (``AGAIN`` before ``FIRST``), then
    in the order they came. Each tick runs in a copy of its caller's context, as
    ``asyncio.to_thread`` does (Kopf's event posting reads it)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._queue: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, priority: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in one of the threads; its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        self._submit(priority, (future, call))
        return await asyncio.wrap_future(future)

    def _submit(self, priority: int, job: Any) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the tick pool is closed")
            if len(self._workers) < self.threads:
                worker = threading.Thread(target=self._work, name="tick", daemon=True)
                worker.start()
                self._workers.append(worker)
            self._queue.put((priority, next(self._order), job))

    def _work(self) -> None:
        while True:
            _, _, job = self._queue.get()
            if job is None:
                return
            future, call = job
            if not future.set_running_or_notify_cancel():
                continue  # its caller was cancelled while it waited
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the awaiting caller, as to_thread does
                future.set_exception(exc)

    def close(self, timeout: float = 10.0) -> None:
        """Stop: ticks running finish, ticks still queued are cancelled (their callers see
        ``CancelledError``; at a stop thousands of first observations may be queued, and
        running them would hold the process up), later ``run`` calls fail. Waits at most
        ``timeout`` seconds in all for the threads."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        while True:
            try:
                _, _, job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
        for _ in workers:
            self._queue.put((FIRST + 1, next(self._order), None))
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
