"""The tables' Kopf glue, and the module Kopf loads: thin glue from Kopf to ``driver.Driver``.

Each handler parses the resource into its typed model, reads what Kopf gives (indexes, memo),
calls the driver (which ticks the table and writes its status: ``handlers.driver``,
``handlers.status_writer``) and returns None (Kopf would store a return value in the status,
which our strict status schema rejects). Every handler has a stable ``id=`` and is safe to
re-run. The rest of the glue is split by concern and registers by being imported here: start-up
and the probes (``handlers.kopf_startup``), the policies (``handlers.kopf_policies``, over the
policy driver); what they share is in ``handlers.kopf_glue``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from txntable.api.conditions import Event
from txntable.api.constants import GROUP, PLURAL_TABLE, VERSION
from txntable.api.errors import InvalidSpecError
from txntable.api.meta import resource_key
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.controller.runs import run_backends
from txntable.handlers import kopf_policies, kopf_startup  # noqa: F401 - registers their handlers
from txntable.handlers.driver import Driven, Policies, first_observation_delay
from txntable.handlers.kopf_glue import (
    CONFIG,
    State,
    drop_legacy_finalizer,
    mine,
    shed,
    started,
    state_of,
)
from txntable.handlers.status_writer import Current
from txntable.handlers.tick_pool import AGAIN, FIRST
from txntable.launch import Backend, LaunchError, PermanentLaunchError
from txntable.launch.run_cache import CachedRuns
from txntable.reconcile.resolve import resolve
from txntable.reconcile.status import invalid_spec_status

#: the longest a table's commit-events daemon sleeps before it looks at ``stopped`` and at the
#: table's next due time again (a thousand idle daemons wake ~17 times a second in all)
DAEMON_IDLE_SECONDS = 60.0
#: a table created this little before the controller started is new, not found: the clocks of
#: the API server and the controller's node may differ by a few seconds
CREATED_AT_START_SLACK = timedelta(seconds=10)


def _invalid_status(body: Mapping[str, Any], exc: InvalidSpecError) -> dict[str, Any]:
    generation = body.get("metadata", {}).get("generation")
    return invalid_spec_status(generation, str(exc), datetime.now(UTC))


@kopf.on.event(GROUP, VERSION, PLURAL_TABLE, id="spec-changes")
async def spec_changes(
    *, body: kopf.Body, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    """Wake the table's daemon when its spec changes (a new generation): the table is
    observed under the new spec at once (a shorter observeInterval included), not at the due
    time the old one set, and a spec that no longer validates is said so by that tick. An
    event handler, not an update handler: Kopf would keep the whole spec in an annotation of
    every table to tell what changed, and write it at every table's creation."""
    shed(body)
    state = started(memo)
    if state is None:
        return
    if type == "DELETED":
        state.tables.drop(body)
        return
    state.tables.put(dict(body))
    meta = body.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return
    key = resource_key(meta.get("namespace", "default"), str(meta.get("name")), meta.get("uid"))
    known = state.memories.peek(key, Driven)  # none yet: its daemon observes it as it starts
    generation = meta.get("generation")
    if known is not None and known.generation != generation:
        seen, known.generation = known.generation, generation
        if seen is not None:
            state.wake(key)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL_TABLE,
    id="reconcile",
    interval=CONFIG.observe_interval_seconds,
    initial_delay=1.0,
    sharp=False,
)
def reconcile(*, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **kwargs: Any) -> None:
    """Observe the table's log, follow and start runs, and write the status if it changed
    (``handlers.driver``; the table's own observe interval gates the tick). Most firings
    find the table observed by its daemon within its interval: the gate is asked first, by
    the interval the last tick was given, unless the object's generation is not the one that
    interval came from (a spec edited while the daemon was down: its wake-up reached no one),
    so such a firing parses neither the table nor its policies."""
    state = state_of(memo)
    if not mine(state, body):
        return  # another replica's table (``handlers.shards``)
    drop_legacy_finalizer(body, patch)
    meta = body.get("metadata") or {}
    key = resource_key(meta.get("namespace", "default"), str(meta.get("name")), meta.get("uid"))
    if not state.driver.due(key, generation=meta.get("generation")):
        return
    _tick(state, body, kwargs, woken=False)


@kopf.daemon(GROUP, VERSION, PLURAL_TABLE, id="commit-events", cancellation_timeout=10.0)
async def commit_events(*, body: kopf.Body, memo: kopf.Memo, stopped: Any, **kwargs: Any) -> None:
    """Observe the table when it starts, whenever its next observation is due (its
    spec.observeInterval after the last one, whatever made that one) and as soon as its
    commits are announced (handlers.commit_events, debounced) or its spec changes. The
    ``reconcile`` timer is the safety net (docs/adr/0009-observation-schedule.md). Both tick
    through the driver, whose gate lets one of them through per due time."""
    state = state_of(memo)
    meta = body.get("metadata", {})
    key = resource_key(meta.get("namespace", "default"), meta.get("name"), meta.get("uid"))
    wake = asyncio.Event()
    own = state.memories.of(key, Driven)
    own.waker = (asyncio.get_running_loop(), wake)
    own.generation = meta.get("generation")  # a later one wakes it (``spec_changes``)
    _hold_if_found_at_start(state, key, body, kwargs)

    def wanted() -> bool:  # a daemon told to stop writes no status: the timer does
        return not stopped

    tried = False
    try:
        while not stopped:
            try:
                # a stopping daemon is cancelled by Kopf after cancellation_timeout if it sleeps
                timeout = _daemon_sleep(state.driver.until_due(key), tried=tried)
                await asyncio.wait_for(wake.wait(), timeout=timeout)
                woken = True
            except TimeoutError:
                woken = False
            tried = woken or (not stopped and state.driver.due(key))
            if not tried:
                continue  # look at ``stopped`` and the due time again
            wake.clear()
            if not mine(state, body):
                tried = True  # another replica's: asleep until its shard comes here (a wake)
                continue
            if state.ticks is None:  # tests: asyncio's default executor
                await asyncio.to_thread(_tick, state, body, kwargs, woken=woken, wanted=wanted)
                continue
            again = state.driver.last_tick(key) is not None
            await state.ticks.run(
                AGAIN if again else FIRST, _tick, state, body, kwargs, woken=woken, wanted=wanted
            )
    finally:
        driven = state.memories.peek(key, Driven)
        if driven is not None:
            driven.waker = None


def _hold_if_found_at_start(
    state: State, key: str, body: kopf.Body, kwargs: Mapping[str, Any]
) -> None:
    """A table that existed when the controller started is first observed at its phase of
    the start-up spread (``driver.first_observation_delay``); one created since, at once.
    The spread is paced by the tables counted at start (``handlers.table_index``), or by those
    seen so far when the count could not be read."""
    created = (body.get("metadata") or {}).get("creationTimestamp")
    try:
        born = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        interval = TxnTable.from_manifest(dict(body)).spec.observe_interval
    except (ValueError, InvalidSpecError):
        return  # no creation time, or a spec whose tick reports it: at once
    if born >= state.started - CREATED_AT_START_SLACK:
        return
    found = max(len(state.tables), state.tables.expected or 0)
    state.driver.hold_first(key, first_observation_delay(key, interval, found))


def _daemon_sleep(until_due: float | None, *, tried: bool) -> float:
    """How long the daemon waits for a wake-up before it observes the table anyway: until its
    next observation is due (``until_due``; at once before its first), at most
    ``DAEMON_IDLE_SECONDS``. A table its last attempt left due (a spec that does not parse
    ticks nothing) waits the whole idle time, lest the daemon spin."""
    if until_due is not None and until_due > 0:
        return min(until_due, DAEMON_IDLE_SECONDS)
    return DAEMON_IDLE_SECONDS if tried else 0.0


def _policies(state: State, namespace: str, kwargs: Mapping[str, Any]) -> Policies:
    """The policies of ``namespace`` from Kopf's indexes, parsed once per version."""
    comp_store = kwargs["compaction_policies"].get(namespace)
    ckpt_store = kwargs["checkpoint_policies"].get(namespace)
    comp, comp_invalid = state.parsed.split(comp_store, CompactionPolicy.from_manifest, namespace)
    ckpt, ckpt_invalid = state.parsed.split(ckpt_store, CheckpointPolicy.from_manifest, namespace)
    return Policies(comp, ckpt, {"compaction": comp_invalid, "checkpoint": ckpt_invalid})


def _run_backends(state: State, body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> set[Backend]:
    """The backends a table's runs can be on: its policies' (as its ticks resolve them), else
    the default backend. Not every backend: asking a cluster without the Spark Operator for
    SparkApplications is a 404 (issue 33.5). A run of a backend no policy of the table names
    any more is left to Kubernetes' garbage collector (runs carry an owner reference to
    their table)."""
    default = Backend(state.config.default_backend)
    try:
        table = TxnTable.from_manifest(dict(body))
    except InvalidSpecError:
        return {default}
    policies = _policies(state, table.metadata.namespace or "default", kwargs)
    comp = resolve(table, policies.compaction, "compaction").policy
    ckpt = resolve(table, policies.checkpoint, "checkpoint").policy
    return run_backends(default, comp, ckpt) or {default}


def _tick(
    state: State,
    live: kopf.Body,
    kwargs: dict[str, Any],
    *,
    woken: bool,
    wanted: Callable[[], bool] | None = None,
) -> None:
    """One tick of the table (``Driver.tick``) from one reading of the object: Kopf replaces
    a live body when a watch event arrives, so the tick judges and patches one version. The
    driver starts it from the newest status known for the table, under the table's lock
    (``Driver._from_newest``): the body may lag behind a write of ours (a third of the status
    writes at 10,000 tables said the same again), or a tick it waited for may just have
    written."""
    body = dict(live)
    if not mine(state, body):
        return
    current = Current.of(body)
    meta = body.get("metadata") or {}
    key = resource_key(meta.get("namespace", "default"), str(meta.get("name")), meta.get("uid"))
    try:
        # parsed at every tick, not from the per-resourceVersion cache: a stand-in that keeps
        # one resourceVersion across status writes (kmock) made it tick on a stale status
        table = TxnTable.from_manifest(body)
    except InvalidSpecError as exc:
        _write_invalid(state, body, current, exc)
        return
    policies = _policies(state, table.metadata.namespace or "default", kwargs)

    def post(event: Event) -> None:
        kopf.event(live, type=event.type, reason=event.reason, message=event.message)

    def still_wanted() -> bool:  # and still this replica's, right before the status write
        return (wanted is None or wanted()) and mine(state, body)

    interval = table.spec.observe_interval
    state.driver.tick(
        table, policies, current, interval=interval, woken=woken, sink=post, wanted=still_wanted
    )
    if not mine(state, body):  # its shard went while it ticked: what the tick kept goes too
        state.let_go(key)


def _write_invalid(
    state: State, body: dict[str, Any], current: Current, exc: InvalidSpecError
) -> None:
    """An invalid spec's status (its conditions; the rest stays), through the status writer."""
    meta = body.get("metadata") or {}
    namespace, name = meta.get("namespace") or "default", str(meta.get("name"))
    key = resource_key(namespace, name, meta.get("uid"))
    new = _invalid_status(body, exc)
    with state.memories.of(key, Driven).lock:  # one write at a time per table
        state.driver.writer.write(key, namespace, name, current, new, whole=False)


def _being_deleted(body: kopf.Body, **_: Any) -> bool:
    """Filter of the deletion handler: Kopf gives an object's changes to its change handlers
    only while one of them matches, so with this filter Kopf writes nothing of its own to a
    live object but the finalizer its daemons and timers need (no handler progress, no
    last-handled configuration: one patch per new object, not two or more)."""
    return bool(body.get("metadata", {}).get("deletionTimestamp"))


@kopf.on.delete(GROUP, VERSION, PLURAL_TABLE, id="stop-runs", when=_being_deleted)
def stop_runs(*, body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
    """Deleting a TxnTable stops its runs; it never touches the table's data or log."""
    state = state_of(memo)
    meta = body.get("metadata", {})
    namespace, name = meta.get("namespace", "default"), meta.get("name")
    key = resource_key(namespace, name, meta.get("uid"))
    for backend in sorted(_run_backends(state, body, kwargs)):
        try:
            launcher = state.operator.launchers(backend)
            listed = (
                launcher.list_fresh(namespace, name)  # never miss a run the cache has not seen
                if isinstance(launcher, CachedRuns)
                else launcher.list_runs(namespace, name)
            )
            for run in listed:
                if not run.state.finished:
                    launcher.delete(namespace, run.name)
        except PermanentLaunchError:
            continue  # a backend this cluster does not serve (no CRD, no API) has no runs
        except LaunchError as exc:
            raise kopf.TemporaryError(f"cannot stop runs: {exc}", delay=15) from exc
        except (ValueError, ImportError):
            continue  # a backend that is not available here has no runs
    state.operator.forget(key)  # its memory, its metric series, its commit events
