"""One shared cache of the operator's runs per namespace, so a tick costs no API call per table.

Every table asks for its runs at every tick (history limits, the concurrency limit, adopting
finished runs). Asking the API server once per table made run listings most of the controller's
traffic: about one ``list`` per table per observe interval. ``CachedRuns`` wraps a cluster
launcher and answers ``list_runs(namespace, table)`` from one labelled listing of every run
txntable manages in the namespace (``app.kubernetes.io/managed-by=txntable``), made at most once
per ``max_age`` seconds; the runs are grouped by their ``txntable.io/table`` label, so the
result does not depend on the server filtering by table.

What the cache itself did is never out of date: a run it launched (or adopted) is served from
the launch's answer until a listing that began after the launch replaces it, and a run it
deleted is hidden until a listing that began after the delete. A run's progress made by others
(Running -> Completed) is seen at the next listing, so at most ``max_age`` late. A failed listing
is remembered for a short while (``retry_after``) and raised to every table asking meanwhile,
so an unavailable API server is not asked once per table.

Thread-safe: Kopf runs handlers on a pool of threads; one thread lists a namespace while the
others asking for that namespace wait for its result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from txntable.api.common import Backend
from txntable.api.constants import LABEL_TABLE
from txntable.launch.base import Launcher
from txntable.launch.errors import LaunchError
from txntable.launch.names import label_value
from txntable.launch.run import RunRequest, RunStatus


@runtime_checkable
class ListsManagedRuns(Protocol):
    """A launcher that can list every run txntable manages in a namespace (one request)."""

    backend: Backend

    def launch(self, req: RunRequest) -> RunStatus: ...

    def status(self, namespace: str, name: str) -> RunStatus: ...

    def delete(self, namespace: str, name: str) -> None: ...

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]: ...

    def list_managed(self, namespace: str) -> list[RunStatus]: ...

    def waiting(self, namespace: str, name: str) -> str: ...


@dataclass
class _Namespace:
    """What is known about one namespace's runs."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: when the last successful listing began (clock seconds), and its runs by table label
    listed_at: float | None = None
    by_table: dict[str, dict[str, RunStatus]] = field(default_factory=dict)
    #: runs this cache launched or deleted, with when: newer than the listing, they win
    launched: dict[str, tuple[float, RunStatus]] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)
    #: the last listing failure and when it happened
    failed_at: float | None = None
    failure: LaunchError | None = None


def _key(run: RunStatus) -> float:
    return run.created.timestamp() if run.created else 0.0


class CachedRuns(Launcher):
    """``inner`` with ``list_runs`` served from a per-namespace listing of every managed run."""

    def __init__(
        self,
        inner: ListsManagedRuns,
        *,
        max_age: float,
        retry_after: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_age < 0 or retry_after < 0:
            raise ValueError("max_age and retry_after must be >= 0 seconds")
        self.inner = inner
        self.backend = inner.backend
        self.max_age = max_age
        self.retry_after = retry_after
        self.clock = clock
        #: listings made (API requests), for tests and metrics
        self.listings = 0
        self._lock = threading.Lock()
        self._namespaces: dict[str, _Namespace] = {}

    def _ns(self, namespace: str) -> _Namespace:
        with self._lock:
            return self._namespaces.setdefault(namespace, _Namespace())

    # -- the Launcher interface ------------------------------------------------------------
    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        """The table's runs, oldest first, from a listing at most ``max_age`` seconds old."""
        ns = self._ns(namespace)
        self._refresh(namespace, ns)
        wanted = label_value(table)
        with self._lock:
            runs = dict(ns.by_table.get(wanted, {}))
            for name, (_, run) in ns.launched.items():
                if run.labels.get(LABEL_TABLE) == wanted:
                    runs[name] = run
            for name in ns.deleted:
                runs.pop(name, None)
        return sorted(runs.values(), key=lambda r: (_key(r), r.name))

    def list_fresh(self, namespace: str, table: str) -> list[RunStatus]:
        """The table's runs straight from the API server (for deletes, which must not miss
        a run the cache has not seen yet)."""
        return self.inner.list_runs(namespace, table)

    def launch(self, req: RunRequest) -> RunStatus:
        status = self.inner.launch(req)
        done = self.clock()  # a listing that begins later includes the run
        labelled = dict(status.labels)
        labelled.setdefault(LABEL_TABLE, label_value(req.table))
        ns = self._ns(req.namespace)
        with self._lock:
            ns.launched[status.name or req.name] = (done, replace(status, labels=labelled))
            ns.deleted.pop(status.name or req.name, None)
        return status

    def status(self, namespace: str, name: str) -> RunStatus:
        return self.inner.status(namespace, name)

    def waiting(self, namespace: str, name: str) -> str:
        """Asked of the run's pods, never cached: only runs in flight are asked."""
        return self.inner.waiting(namespace, name)

    def delete(self, namespace: str, name: str) -> None:
        self.inner.delete(namespace, name)
        at = self.clock()  # a listing that begins later no longer has the run
        ns = self._ns(namespace)
        with self._lock:
            ns.deleted[name] = at
            ns.launched.pop(name, None)

    # -- listing -----------------------------------------------------------------------------
    def _refresh(self, namespace: str, ns: _Namespace) -> None:
        if self._fresh(ns):
            return
        with ns.lock:  # one thread lists; the others wait and use its result
            if self._fresh(ns):
                return
            began = self.clock()
            try:
                runs = self.inner.list_managed(namespace)
            except LaunchError as exc:
                with self._lock:
                    ns.failed_at, ns.failure = self.clock(), exc
                raise
            finally:
                self.listings += 1
            by_table: dict[str, dict[str, RunStatus]] = {}
            for run in runs:
                table = run.labels.get(LABEL_TABLE)
                if table:
                    by_table.setdefault(table, {})[run.name] = run
            with self._lock:
                ns.listed_at, ns.by_table = began, by_table
                ns.failed_at = ns.failure = None
                # what the listing saw (or missed) after the launch/delete is the truth now
                ns.launched = {n: v for n, v in ns.launched.items() if v[0] >= began}
                ns.deleted = {n: at for n, at in ns.deleted.items() if at >= began}

    def _fresh(self, ns: _Namespace) -> bool:
        """Whether the namespace's listing can be used as is (or its failure re-raised)."""
        now = self.clock()
        with self._lock:
            if ns.failure is not None and ns.failed_at is not None:
                if now - ns.failed_at < self.retry_after:
                    raise ns.failure
                return False
            return ns.listed_at is not None and now - ns.listed_at < self.max_age
