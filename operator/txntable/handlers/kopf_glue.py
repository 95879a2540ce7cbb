"""What every Kopf glue module shares: the ``State`` in Kopf's memo and the body helpers.

The Kopf glue is split by concern: start-up and the controller's probes
(``handlers.kopf_startup``), the tables' handlers (``handlers.kopf_handlers``, the module Kopf
and ``python -m txntable`` load, which imports the others so that every handler registers) and
the policies' (``handlers.kopf_policies``). What they all read is here, below them: the
configuration read once at import (Kopf's decorators need the interval then), the state the
startup handler builds, and what each handler does to the body Kopf hands it before anything
else (which replica it belongs to, the fields nothing reads, Kopf's old finalizer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf

from txntable.api.meta import resource_key
from txntable.config import Config
from txntable.controller.memory import TableMemories
from txntable.controller.tick import Operator
from txntable.handlers.driver import Driven, Driver
from txntable.handlers.parsed_resources import ParsedResources
from txntable.handlers.policy_driver import PolicyDriver
from txntable.handlers.readiness import Readiness
from txntable.handlers.shards import Change, ShardKeeper, Shards, shard_of
from txntable.handlers.table_index import TableIndex
from txntable.handlers.tick_pool import TickPool
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.server import MetricsServer

CONFIG = Config.from_env()  # read once; kopf decorators need the interval at import
#: Kopf's default finalizer, which earlier releases left on every object; ours replaced it.
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
#: kubectl's copy of the whole applied manifest, which nothing here reads
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass
class State:
    """What the handlers share, built once in the startup handler and kept in Kopf's memo.
    What is kept per table or policy is in the operator's ``memories`` (the driver's
    ``Driven``, the policy driver's ``PolicyDriven``)."""

    config: Config
    #: ticks tables (``handlers.driver``): the operator, the status writer, commit events
    driver: Driver
    #: writes policies' statuses (``handlers.policy_driver``); None: the policies' handlers
    #: do nothing (tests that drive the tables' handlers alone)
    policies: PolicyDriver | None = None
    metrics: ControllerMetrics | None = None
    servers: list[MetricsServer] = field(default_factory=list)
    #: what /readyz answers: started, and Kopf not paused by peering
    readiness: Readiness = field(default_factory=Readiness)
    #: policies and tables parsed once per resourceVersion (the policy driver's too)
    parsed: ParsedResources = field(default_factory=ParsedResources)
    #: the TxnTable bodies by namespace (``handlers.table_index``: not a Kopf index)
    tables: TableIndex = field(default_factory=TableIndex)
    #: the threads of the daemons' ticks, a table observed before ahead of a first observation
    ticks: TickPool | None = None
    #: when the controller started (wall clock): a table created before was found at start-up
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: the shards this replica holds (``handlers.shards``); None: it serves every table
    shards: Shards | None = None
    keeper: ShardKeeper | None = None

    def owns(self, namespace: str | None, name: str) -> bool:
        """Whether this replica maintains the object ``namespace/name`` (always, unsharded)."""
        return self.shards is None or self.shards.owns(namespace or "default", name)

    @property
    def operator(self) -> Operator:
        return self.driver.operator

    @property
    def memories(self) -> TableMemories:
        return self.driver.operator.memories

    def shards_changed(self, change: Change) -> None:
        """Shards gained: their tables are observed at once (their daemons are woken). Shards
        lost: what was kept of their tables goes (the observer's handle, runs, metric series,
        the commit-events watch); the daemon's waker stays, for when the shard comes back."""
        assert self.shards is not None
        count = self.shards.count
        for body in self.tables.all():  # every table, whether a tick of it ever finished here
            meta = body.get("metadata") or {}
            namespace, name = meta.get("namespace") or "default", str(meta.get("name"))
            shard = shard_of(namespace, name, count)
            key = resource_key(namespace, name, meta.get("uid"))
            if shard in change.lost:
                self.let_go(key)
            elif shard in change.gained:
                self.wake(key)

    def let_go(self, key: str) -> None:
        """Forget what was kept of a table another replica maintains now, but its daemon's
        waker (for when its shard comes back)."""
        driven = self.memories.peek(key, Driven)
        waker = driven.waker if driven is not None else None
        self.operator.forget(key)
        if waker is not None:
            self.memories.of(key, Driven).waker = waker

    def wake(self, key: str) -> None:
        """Wake ``key``'s commit-events daemon (called from the debounce thread)."""
        driven = self.memories.peek(key, Driven)
        if driven is not None and driven.waker is not None:
            loop, event = driven.waker
            loop.call_soon_threadsafe(event.set)


def state_of(memo: kopf.Memo) -> State:
    """The state the startup handler put in Kopf's memo."""
    state: State = memo.state
    return state


def started(memo: Any) -> State | None:
    """The state, or None before the startup handler made it (tests call handlers without)."""
    return getattr(memo, "state", None)


def mine(state: State, body: Mapping[str, Any]) -> bool:
    """Whether this replica maintains the object of ``body`` (``State.owns``)."""
    meta = body.get("metadata") or {}
    return state.owns(meta.get("namespace"), str(meta.get("name")))


def shed(body: kopf.Body) -> None:
    """Drop from an arriving object what nothing in the controller reads, before Kopf keeps
    it: ``metadata.managedFields`` (the server's field ownership, half the JSON of a TxnTable
    whose status we write) and kubectl's last-applied copy of the manifest. Kopf keeps the
    newest body of every object for its daemons and timers and our indexes share its parts,
    so this is most of what an idle table costs the controller (docs/benchmarks.md,
    scale_apiserver). Kopf calls the indexes first for every event of an object, before its
    other handlers; it reads neither field. The raw dict is changed in place: ``metadata``
    loses a key, which is safe for a tick thread reading it at the same time (nothing iterates
    ``metadata``), and ``annotations`` is replaced, not changed, since ticks iterate it."""
    meta = body.get("metadata")
    if not isinstance(meta, dict):
        return
    meta.pop("managedFields", None)
    notes = meta.get("annotations")
    if isinstance(notes, dict) and LAST_APPLIED in notes:
        meta["annotations"] = {k: v for k, v in notes.items() if k != LAST_APPLIED}


def drop_legacy_finalizer(body: Mapping[str, Any], patch: kopf.Patch) -> None:
    """Remove Kopf's default finalizer left by an earlier release: nothing would ever remove
    it now that Kopf uses ours, so the object would hang in Terminating when deleted."""
    finalizers = list(body.get("metadata", {}).get("finalizers") or [])
    if LEGACY_FINALIZER in finalizers:
        kept = dict.fromkeys(f for f in finalizers if f != LEGACY_FINALIZER)  # order, no twins
        patch.metadata["finalizers"] = list(kept)
