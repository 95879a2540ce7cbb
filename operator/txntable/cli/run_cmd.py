"""``txntable run --local PATH``: the controller's loop without a cluster.

Reads the TxnTable / CompactionPolicy / CheckpointPolicy manifests in PATH (a directory, or one
file; ``cli.local_manifests``), then ticks every table on a timer through the driver the Kopf
handlers use (``handlers.driver``), launching Spark in local mode through the local launcher.
Statuses live in memory (the status writer's ``MemoryStatus``), keyed as the controller keys
them (by namespace/name here), and are printed when they change; ``--json`` prints JSON lines
only. After each round every policy's status is judged from its namespace's tables through the
policy driver the Kopf handlers use (``handlers.policy_driver``) and printed when it changes.
``--once`` stops when the work has converged: no run in flight and nothing started in a tick. An
invalid manifest stops the command before anything runs: every error of every manifest on
stderr, one line each, then exit status 2, as the API server would refuse the object. While it
runs, changed manifests are re-read (an approval annotation added, a policy edited); an invalid
edit is reported and the manifests before it stay in force. Ctrl-C (or SIGTERM) stops the runs
this process started, and says so. Commit events (``handlers.commit_events``) wake a table
between ticks, as in the cluster, unless ``--no-events``; ticks count the polling rounds only.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txntable.cli.errors import CliError
from txntable.cli.local_manifests import Manifests, ManifestWatch, load_manifests, refuse
from txntable.config import Config
from txntable.jobs.flags import at_least, positive_seconds

# The API models, YAML and the controller are imported where they are used: every ``txntable``
# command registers this one, and building the parser must stay cheap.
if TYPE_CHECKING:
    from txntable.api.conditions import Event
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, PolicyStatus, TxnTable
    from txntable.controller.tick import Operator, Tick
    from txntable.handlers.commit_events import CommitEvents
    from txntable.handlers.driver import Policies
    from txntable.handlers.status_writer import MemoryStatus
    from txntable.launch import LocalLauncher

    Policy = CompactionPolicy | CheckpointPolicy
    #: what an Event is posted on
    Resource = TxnTable | Policy


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run the controller loop (local mode)")
    parser.add_argument(
        "--local",
        metavar="PATH",
        required=True,
        help="manifests to reconcile: a directory (every *.yaml/*.yml under it) or one file",
    )
    parser.add_argument("--once", action="store_true", help="stop when the work has converged")
    parser.add_argument(
        "--interval",
        type=positive_seconds,
        default=2.0,
        metavar="SECONDS",
        help="seconds between ticks (default 2)",
    )
    parser.add_argument(
        "--max-ticks",
        type=at_least(0, "ticks"),
        default=0,
        metavar="N",
        help="stop after N ticks (default 0: never)",
    )
    parser.add_argument(
        "--runs-dir",
        default=".txntable-runs",
        help="where local runs keep their state (default .txntable-runs)",
    )
    parser.add_argument("--json", action="store_true", help="print statuses as JSON lines")
    parser.add_argument(
        "--no-events",
        action="store_true",
        help="poll every --interval only; by default commits wake their table (LogProbe, SQS)",
    )
    parser.set_defaults(run=run)


def _summary(table: TxnTable, tick: Tick) -> str:
    s = tick.status
    parts = [
        f"{table.metadata.namespaced_name}: phase={s.phase}",
        f"version={s.version}",
        f"files={s.files}",
        f"small={s.small_files}",
        f"sinceCheckpoint={s.commits_since_checkpoint}",
    ]
    for record, label in ((s.last_compaction, "compaction"), (s.last_checkpoint, "checkpoint")):
        if record is not None:
            parts.append(f"{label}={record.run_name}:{record.outcome}")
    ready = next((c for c in s.conditions if c.type == "Ready"), None)
    if ready is not None and ready.status != "True":
        parts.append(f"notReady={ready.reason}: {ready.message}")
    return " ".join(parts)


def _namespace(resource: Resource) -> str:
    return resource.metadata.namespace or "default"


def make_operator(
    runs_dir: Path, config: Config, launcher: LocalLauncher | None = None
) -> Operator:
    """The controller's ``Operator``, every run local (``launcher``, else one in ``runs_dir``)."""
    from txntable.controller.tick import Operator
    from txntable.launch import Backend, Launcher, LocalLauncher

    local = launcher or LocalLauncher(runs_dir)

    def launchers(backend: Backend) -> Launcher:
        del backend  # local mode runs everything locally, whatever the policy says
        return local

    return Operator(config=config, launchers=launchers)


def reconcile_loop(
    manifests: Manifests,
    operator: Operator,
    *,
    once: bool,
    interval: float,
    max_ticks: int = 0,
    on_tick: Callable[[TxnTable, Tick], None] | None = None,
    events: CommitEvents | None = None,
    reload: Callable[[], Manifests | None] | None = None,
    on_event: Callable[[Resource, Event], None] | None = None,
    on_policy: Callable[[Policy, PolicyStatus], None] | None = None,
) -> list[TxnTable]:
    """Tick every table each ``interval`` seconds, as the controller's timer does, and a table
    as soon as ``events`` wakes it (its ``on_wake`` is set here), as its daemon does: both
    through the controller's driver (``handlers.driver``), statuses written to a store in memory
    by its status writer. After each round every policy's status is judged from the tables'
    statuses, as its timer does in the cluster, through the policy driver
    (``handlers.policy_driver``), into the same store. ``on_event`` gets every Event a tick
    posts (a table's or a policy's); ``on_tick`` every tick; ``on_policy`` every policy's status
    at every round. ``reload``, asked before every round, returns new manifests when they
    changed (None when not): a table or policy keeps its status across a reload, one that is
    gone is forgotten.

    Returns the tables with their last status once converged (``once``) or after ``max_ticks``
    polling rounds.
    """
    from txntable.handlers.driver import Driver
    from txntable.handlers.status_writer import MemoryStatus, StatusWriter

    store = MemoryStatus()
    # a table forgotten is unwatched by the driver, its status dropped by the writer
    driver = Driver(operator, StatusWriter(operator.memories, store), events=events)
    policies = _LocalPolicies(operator, store, on_event, on_policy)
    woken = _Woken(events)
    tables = list(manifests.tables)
    busy: dict[str, bool] = {}
    ticks = 0
    while True:
        fresh = reload() if reload is not None else None
        if fresh is not None:
            tables = _forget_gone(tables, fresh.tables, operator)
            policies.forget_gone(manifests, fresh)
            manifests = fresh
            busy = {k: v for k, v in busy.items() if k in {t.metadata.key for t in tables}}
        now_woken = woken.take()
        polled = False
        for table in tables:
            key = table.metadata.key  # two tables of one name in two namespaces are two
            due = driver.due(key, interval)
            tick = driver.tick(
                _stored(store, table),
                _policies_of(manifests, table),
                store.read(key),
                interval=interval,
                woken=key in now_woken,
                sink=functools.partial(on_event, table) if on_event else lambda _event: None,
            )
            if tick is None:
                continue
            polled = polled or due
            if on_tick is not None:
                on_tick(table, tick)
            busy[key] = bool(tick.launched) or tick.active_runs > 0
        policies.tick(manifests, [_stored(store, t) for t in tables])
        ticks += polled
        if polled and ((once and not any(busy.values())) or (max_ticks and ticks >= max_ticks)):
            return [_stored(store, t) for t in tables]
        lasts = [driver.last_tick(t.metadata.key) for t in tables]
        next_poll = min((t for t in lasts if t is not None), default=time.monotonic()) + interval
        if reload is not None:  # look at the manifests at least every second
            next_poll = min(next_poll, time.monotonic() + RELOAD_SECONDS)
        woken.wait(max(0.0, next_poll - time.monotonic()))


#: how often ``txntable run --local`` looks for changed manifests between ticks
RELOAD_SECONDS = 1.0


def _stored(store: MemoryStatus, table: TxnTable) -> TxnTable:
    """The table with the status the store holds (a manifest's own status at first)."""
    from txntable.api.types import TxnTableStatus

    key = table.metadata.key
    if key not in store.statuses:
        store.statuses[key] = table.status.to_status()
    return replace(table, status=TxnTableStatus.from_dict(store.statuses[key]))


def _policies_of(manifests: Manifests, table: TxnTable) -> Policies:
    """The policies a table sees: as in the cluster, those of its own namespace."""
    from txntable.handlers.driver import Policies

    ns = _namespace(table)
    return Policies(
        [p for p in manifests.compaction if _namespace(p) == ns],
        [p for p in manifests.checkpoint if _namespace(p) == ns],
    )


class _Woken:
    """The tables the commit events woke since the last round, and the wait for the next."""

    def __init__(self, events: CommitEvents | None) -> None:
        self._woken: set[str] = set()
        self._wake = threading.Event()
        self._guard = threading.Lock()
        if events is not None:
            events.on_wake = self._on_wake

    def _on_wake(self, key: str) -> None:
        with self._guard:
            self._woken.add(key)
        self._wake.set()

    def take(self) -> set[str]:
        """The tables woken since the last call."""
        with self._guard:
            taken = set(self._woken)
            self._woken.clear()
        self._wake.clear()
        return taken

    def wait(self, timeout: float) -> None:
        """Until a table is woken, at most ``timeout`` seconds."""
        self._wake.wait(timeout=timeout)


class _LocalPolicies:
    """Local mode's policy statuses: the policy driver over the store the tables' statuses
    live in (a policy's key never meets a table's: ``policy_driver.policy_key``)."""

    def __init__(
        self,
        operator: Operator,
        store: MemoryStatus,
        on_event: Callable[[Resource, Event], None] | None,
        on_policy: Callable[[Policy, PolicyStatus], None] | None,
    ) -> None:
        from txntable.handlers.policy_driver import PolicyDriver
        from txntable.handlers.status_writer import StatusWriter

        writer = StatusWriter(operator.memories, store)  # drops a forgotten policy's status
        self.driver = PolicyDriver(operator.memories, {"compaction": writer, "checkpoint": writer})
        self.store, self.on_event, self.on_policy = store, on_event, on_policy

    def tick(self, manifests: Manifests, tables: list[TxnTable]) -> None:
        """Every policy's status from the tables of its namespace, with their statuses."""
        from txntable.handlers.policy_driver import kind_of
        from txntable.reconcile.policy_status import govern

        every = _every_policy(manifests)
        for policy in every:
            kind, ns = kind_of(policy), _namespace(policy)
            kin = [p for p in every if kind_of(p) == kind and _namespace(p) == ns]
            view = govern([t for t in tables if _namespace(t) == ns], kin, kind)
            key = self._key(policy)
            sink = functools.partial(self.on_event, policy) if self.on_event else _ignore
            stored = self._stored(policy, key)
            status = self.driver.tick(stored, view, self.store.read(key), sink=sink)
            if self.on_policy is not None:
                self.on_policy(policy, status)

    def forget_gone(self, old: Manifests, new: Manifests) -> None:
        """Forget the policies gone from the manifests, as the controller forgets a deleted one
        (its status and what the policy driver kept of it)."""
        kept = {self._key(p) for p in _every_policy(new)}
        for key in {self._key(p) for p in _every_policy(old)} - kept:
            self.driver.memories.forget(key)

    def _stored(self, policy: Policy, key: str) -> Policy:
        """The policy with the status the store holds (the manifest's own status at first)."""
        from txntable.api.types import PolicyStatus

        if key not in self.store.statuses:
            self.store.statuses[key] = policy.to_status()
        return replace(policy, status=PolicyStatus.from_dict(self.store.statuses[key]))

    @staticmethod
    def _key(policy: Policy) -> str:
        from txntable.handlers.policy_driver import kind_of, policy_key

        meta = policy.metadata
        return policy_key(kind_of(policy), meta.namespace, meta.name, meta.uid)


def _every_policy(manifests: Manifests) -> list[Policy]:
    return [*manifests.compaction, *manifests.checkpoint]


def _ignore(_event: Event) -> None:
    """A sink that drops the Events (no printer given)."""


def _forget_gone(old: list[TxnTable], new: list[TxnTable], operator: Operator) -> list[TxnTable]:
    """``new``; the controller forgets the tables that are gone (their status, their commit
    events), as it does for a deleted TxnTable."""
    for key in {t.metadata.key for t in old} - {t.metadata.key for t in new}:
        operator.forget(key)
    return list(new)


def run(args: argparse.Namespace) -> int:
    from txntable.launch import LocalLauncher

    source = Path(args.local)
    manifests = load_manifests(source)
    if manifests.errors:
        refuse(manifests, args.local)
    if not manifests.tables:
        raise CliError(f"no valid TxnTable manifest in {args.local}")
    launcher = LocalLauncher(Path(args.runs_dir))
    operator = make_operator(Path(args.runs_dir), Config.from_env(), launcher)
    output = _Output(json_lines=args.json)
    watch = ManifestWatch(source)

    def reload() -> Manifests | None:
        if not watch.changed():
            return None
        fresh = load_manifests(source)
        if fresh.errors or not fresh.tables:
            # as the API server refuses an invalid edit: the objects before it stay in force
            output.note("manifests changed but are refused; the ones before stay in force", fresh)
            return None
        output.note("manifests changed: re-read", fresh)
        return fresh

    events = None
    if not args.no_events:
        from txntable.handlers.commit_events import CommitEvents

        config = Config.from_env()
        events = CommitEvents(
            lambda _key: None,  # reconcile_loop sets its own
            probe_interval=config.event_probe_interval_seconds,
            debounce=config.event_debounce_seconds,
        ).start()
    try:
        reconcile_loop(
            manifests,
            operator,
            once=args.once,
            interval=args.interval,
            max_ticks=args.max_ticks,
            on_tick=output.show,
            events=events,
            on_event=output.event,
            on_policy=output.policy,
            reload=reload,
        )
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: what this process started, it stops
        stopped = launcher.stop_started()
        if stopped:
            raise type(exc)(f"stopped the run(s) it had started: {', '.join(stopped)}") from None
        raise
    finally:
        if events is not None:
            events.close()
    return 0


class _Output:
    """What ``run --local`` prints: a status line per table and per policy when it changes,
    and every Event the controller would record; with ``--json`` only JSON lines (``{"table",
    "namespace", "status"}``, ``{"table", "namespace", "event"}``, ``{"policy", "kind",
    "namespace", "policyStatus"}``, ``{"policy", "kind", "namespace", "policyEvent"}``,
    ``{"manifests"}``: a policy's lines have keys of their own, so that a reader of the tables'
    lines never takes one for a table's)."""

    def __init__(self, *, json_lines: bool) -> None:
        self.json_lines = json_lines
        self.printed: dict[str, str] = {}

    def event(self, resource: Resource, event: Event) -> None:
        """An Event the controller would post on the table or policy (the drivers' sink)."""
        table = _is_table(resource)
        if self.json_lines:
            doc = {"type": event.type, "reason": str(event.reason), "message": event.message}
            about = self._about(resource, event=doc) if table else self._policy(resource)
            print(json.dumps(about if table else {**about, "policyEvent": doc}))
        else:
            name = resource.metadata.namespaced_name
            what = name if table else f"{type(resource).__name__} {name}"
            print(f"event {what} {event.type} {event.reason}: {event.message}")

    def show(self, table: TxnTable, tick: Tick) -> None:
        """The table's status line, when it changed."""
        line = (
            json.dumps(self._about(table, status=tick.status.to_status()), default=str)
            if self.json_lines
            else _summary(table, tick)
        )
        self._print(table.metadata.key, line)

    def policy(self, policy: Policy, status: PolicyStatus) -> None:
        """The policy's status line, when it changed."""
        line = (
            json.dumps({**self._policy(policy), "policyStatus": status.to_status()}, default=str)
            if self.json_lines
            else _policy_summary(policy, status)
        )
        self._print(f"{type(policy).__name__}:{policy.metadata.key}", line)

    def note(self, what: str, manifests: Manifests) -> None:
        """A re-read of the manifests, and the errors that refused it."""
        if self.json_lines:
            print(json.dumps({"manifests": what, "errors": manifests.errors}), flush=True)
            return
        print(what, flush=True)
        for error in manifests.errors:
            print(f"invalid manifest: {error}", file=sys.stderr)

    def _print(self, key: str, line: str) -> None:
        if self.printed.get(key) != line:
            print(line, flush=True)
            self.printed[key] = line

    @staticmethod
    def _about(table: Resource, **doc: Any) -> dict[str, Any]:
        return {"table": table.metadata.name, "namespace": _namespace(table), **doc}

    @staticmethod
    def _policy(policy: Resource) -> dict[str, Any]:
        meta = policy.metadata
        return {"policy": meta.name, "kind": type(policy).__name__, "namespace": _namespace(policy)}


def _is_table(resource: Resource) -> bool:
    from txntable.api.types import TxnTable

    return isinstance(resource, TxnTable)


def _policy_summary(policy: Policy, status: PolicyStatus) -> str:
    parts = [
        f"{type(policy).__name__} {policy.metadata.namespaced_name}: phase={status.phase}",
        f"matched={status.matched_table_count}",
    ]
    if status.active_runs:
        parts.append(f"active={len(status.active_runs)}")
    if status.next_schedule_time is not None:
        parts.append(f"next={status.next_schedule_time.isoformat()}")
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    if ready is not None and ready.status != "True":
        parts.append(f"notReady={ready.reason}: {ready.message}")
    return " ".join(parts)
