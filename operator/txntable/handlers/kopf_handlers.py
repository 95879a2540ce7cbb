"""The only Kopf code: thin glue from Kopf events, timers and indexes to ``driver.Driver``.

Each handler parses the resource into its typed model, reads what Kopf gives (indexes, memo),
calls the driver (which ticks the table and writes its status: ``handlers.driver``,
``handlers.status_writer``) or, for a policy, computes its status, and returns None (Kopf
would store a return value in the status, which our strict status schema rejects). Every
handler has a stable ``id=`` and is safe to re-run. Settings are applied once at start-up;
clients live in the memo, never in globals.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import kopf
from prometheus_client import CollectorRegistry

from txntable.api.conditions import ConditionType, EventReason, Reason
from txntable.api.constants import (
    FINALIZER,
    GROUP,
    PLURAL_CHECKPOINT_POLICY,
    PLURAL_COMPACTION_POLICY,
    PLURAL_TABLE,
    VERSION,
)
from txntable.api.errors import InvalidSpecError
from txntable.api.meta import resource_key
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.handlers.api_session import bounded_session
from txntable.handlers.commit_events import CommitEvents
from txntable.handlers.driver import Driven, Driver, Policies, first_observation_delay
from txntable.handlers.following import run_backends
from txntable.handlers.governed_views import GovernedViews
from txntable.handlers.liveness import Liveness
from txntable.handlers.memory import TableMemories
from txntable.handlers.operate import Event, Operator
from txntable.handlers.parsed_resources import ParsedResources
from txntable.handlers.readiness import Readiness
from txntable.handlers.secret_cache import SecretCache
from txntable.handlers.secret_source import SecretCredentials, read_secret
from txntable.handlers.shards import (
    LEASE_SECONDS,
    Change,
    KubeLeases,
    ShardKeeper,
    Shards,
    run_share,
    shard_of,
)
from txntable.handlers.status_writer import Current, KubeStatus, StatusWriter, changed
from txntable.handlers.table_index import TableIndex, count_tables
from txntable.handlers.tick_pool import AGAIN, FIRST, TickPool
from txntable.launch import (
    Backend,
    Launcher,
    LaunchError,
    PermanentLaunchError,
    make_launcher,
)
from txntable.launch.run_cache import CachedRuns, ListsManagedRuns
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.observability.server import MetricsServer, register_process_collectors
from txntable.reconcile.policy_status import governed_status
from txntable.reconcile.resolve import resolve
from txntable.reconcile.status import invalid_spec_status

log = logging.getLogger(__name__)

ENV_RUNS_DIR = "TXNTABLE_LOCAL_RUNS_DIR"
CONFIG = Config.from_env()  # read once; kopf decorators below need the interval at import
#: Kopf's default finalizer, which earlier releases left on every object; ours replaced it.
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
#: A reconcile running longer than this is stuck: the liveness probe fails, the pod restarts.
STUCK_RECONCILE_SECONDS = max(900.0, 30 * CONFIG.observe_interval_seconds)
#: how often Kopf looks again whether a deleted table's timer has exited (see ``startup``)
DELETION_RECHECK_SECONDS = 2.0
#: the longest a table's commit-events daemon sleeps before it looks at ``stopped`` and at the
#: table's next due time again (a thousand idle daemons wake ~17 times a second in all)
DAEMON_IDLE_SECONDS = 60.0
#: a table created this little before the controller started is new, not found: the clocks of
#: the API server and the controller's node may differ by a few seconds
CREATED_AT_START_SLACK = timedelta(seconds=10)
#: kubectl's copy of the whole applied manifest, which nothing here reads
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass
class State:
    """What the handlers share, built once in the startup handler and kept in Kopf's memo.
    What is kept per table is in the operator's ``memories`` (the driver's ``Driven``)."""

    config: Config
    #: ticks tables (``handlers.driver``): the operator, the status writer, commit events
    driver: Driver
    metrics: ControllerMetrics | None = None
    servers: list[MetricsServer] = field(default_factory=list)
    #: what /readyz answers: started, and Kopf not paused by peering
    readiness: Readiness = field(default_factory=Readiness)
    #: policies and tables parsed once per resourceVersion
    parsed: ParsedResources = field(default_factory=ParsedResources)
    #: the TxnTable bodies by namespace (``handlers.table_index``: not a Kopf index)
    tables: TableIndex = field(default_factory=TableIndex)
    #: who governs what in each namespace, shared by the policies' ticks
    governed: GovernedViews = field(default_factory=GovernedViews)
    #: per policy (uid): the reason it is Invalid that was announced last
    policies_said: dict[str, str] = field(default_factory=dict)
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


#: objects per page of Kopf's initial listing of each kind (``settings.watching.chunk_size``)
LIST_PAGE = 500
#: this replica's name among its peers: the pod's (``POD_ID``, as Kopf reads it), else the host's
IDENTITY = os.environ.get("POD_ID") or f"{socket.gethostname()}-{os.getpid()}"
#: how the API server's audit log tells the replicas apart (they share one ServiceAccount)
USER_AGENT = f"txntable ({IDENTITY})"
#: the namespace a pod's service account is in (where the shards' Leases live)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace() -> str:
    """The controller's namespace: its pod's, else the kubeconfig context's, else default."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        pass
    from kubernetes import config

    try:
        _, context = config.list_kube_config_contexts()  # type: ignore[no-untyped-call, unused-ignore]
    except Exception:  # no kubeconfig: the client's own failure comes at the first call
        return "default"
    return str((context or {}).get("context", {}).get("namespace") or "default")


def _api_client(threads: int, *, retries: int | None = None) -> Any:
    """The handlers' own client (launchers, Secrets, status from the commit-events daemon), found
    as Kopf's login finds its own: in-cluster credentials, else ``KUBECONFIG``. Tests point
    both at their API server with a kubeconfig, so this is the only path there is.

    Its pool keeps a connection for each of the ``threads`` that can use it at once (Kopf's
    executor, asyncio's default one that runs the daemons' ticks, a few of our own). The
    client's default is five per core, 10 here: at 10,000 tables the pool was full 137 times in
    the first two minutes, and each time a connection was closed and a new TLS connection
    opened for the next write."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call, unused-ignore]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call, unused-ignore]
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = threads
    if retries is not None:  # urllib3 retries a request that timed out 3 times by default
        configuration.retries = retries
    api = client.ApiClient(configuration)
    api.user_agent = USER_AGENT
    return api


@kopf.on.login(id="login")
async def login(**kwargs: Any) -> Any:
    """The kubernetes client's credentials (in-cluster, else ``KUBECONFIG``), in a session
    that keeps at most ``api_requests_in_flight`` requests in flight (``handlers.api_session``:
    Kopf's own has no bound, and a start on many new objects met 429s)."""
    info = await asyncio.to_thread(kopf.login_via_client, **kwargs)
    if info is None:
        return None
    return kopf.AiohttpSession(
        server=info.server,
        default_namespace=info.default_namespace,
        priority=info.priority,
        expiration=info.expiration,
        aiohttp_session=bounded_session(info, CONFIG.api_requests_in_flight, user_agent=USER_AGENT),
    )


@kopf.on.startup(id="startup")
def startup(*, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = CONFIG
    # Kopf's bookkeeping goes to annotations: our status schemas reject unknown fields.
    # Kopf needs a finalizer on every kind with a timer; it carries our name, not Kopf's
    # default marker, so an admin can tell whose it is (uninstall: docs/install.md).
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = max(4, config.max_concurrent_runs * 2)
    settings.watching.server_timeout = 300
    # Kopf lists each kind before it watches it, by default in one response: at 10,000
    # tables that is one JSON document of about 60 MB, decoded whole, and the controller's
    # peak memory at start-up. Pages of LIST_PAGE objects are decoded and let go one by one.
    settings.watching.chunk_size = LIST_PAGE
    # A table deleted while its timer ticks (a thread Kopf cannot cancel) keeps its finalizer
    # until Kopf sees the timer has exited, and Kopf looks again only after this many seconds
    # (60 by default) unless another event of the object comes first: deleting a TxnTable
    # took a minute whenever it landed mid-tick, which is often on a loaded controller.
    settings.background.cancellation_polling = DELETION_RECHECK_SECONDS
    # A namespaced controller serves exactly the namespaces it is given, so it does not watch
    # Namespaces (nor CRDs) to find more: that needs cluster-wide permissions the chart does not
    # grant it, and without them Kopf retried the refused listing for about a minute at every
    # start before serving any table. Resources are discovered once, at start.
    settings.scanning.disabled = bool(config.namespaces)
    # the daemons' ticks take as many threads as asyncio's default executor would
    ticks = TickPool(min(32, (os.cpu_count() or 1) + 4))
    api_client = _api_client((settings.execution.max_workers or 0) + ticks.threads + 4)
    launchers: dict[Backend, Launcher] = {}

    def launcher_for(backend: Backend) -> Launcher:
        if backend not in launchers:
            runs_dir = Path(os.environ.get(ENV_RUNS_DIR, "/tmp/txntable-runs"))
            made = make_launcher(backend, config, api_client=api_client, runs_dir=runs_dir)
            # one listing per namespace per interval serves every table (launch.run_cache)
            launchers[backend] = (
                CachedRuns(made, max_age=config.observe_interval_seconds)
                if isinstance(made, ListsManagedRuns)
                else made
            )
        return launchers[backend]

    registry = register_process_collectors(CollectorRegistry())
    metrics = ControllerMetrics(registry)
    operator = Operator(
        config=config,
        launchers=launcher_for,
        metrics=metrics,
        engine_metrics=EngineMetrics(registry),
    )
    secrets = SecretCache(lambda ns, name: read_secret(api_client, ns, name))
    driver = Driver(
        operator,
        StatusWriter(operator.memories, KubeStatus(api_client)),
        credentials=SecretCredentials(secrets, operator.memories, operator.reopen),
        liveness=Liveness(STUCK_RECONCILE_SECONDS),
    )
    state = State(
        config, driver, metrics=metrics, tables=_counted_tables(api_client, config), ticks=ticks
    )
    if config.shards:
        # a client of its own that never retries: a Lease request must end within its
        # timeout, inside the margin (``handlers.shards.REQUEST_SECONDS``)
        leases = KubeLeases(
            _api_client(2, retries=0), _own_namespace(), config.peering_name, LEASE_SECONDS
        )
        state.shards = Shards(
            leases,
            identity=IDENTITY,
            set_name=config.peering_name,
            count=config.shards,
        )
        shards = state.shards
        operator.run_limit = lambda: run_share(
            config.max_concurrent_runs, len(shards.held()), shards.count
        )
        operator.launching.permit = lambda t: state.owns(t.metadata.namespace, t.metadata.name)
    else:
        state.readiness.peering.install()
    # /healthz is Kopf's liveness endpoint (python -m txntable --liveness); /metrics and
    # /readyz (not paused by peering) here
    state.servers = [
        MetricsServer(registry, config.metrics_port, ready=state.readiness.report).start()
    ]
    events = driver.events = CommitEvents(
        state.wake,
        probe_interval=config.event_probe_interval_seconds,
        debounce=config.event_debounce_seconds,
        on_event=metrics.commit_event,
    ).start()
    operator.memories.on_forget(lambda key, _: events.unwatch(key))
    memo.state = state
    if state.shards is not None:
        held = state.shards

        def changed(change: Change) -> None:
            metrics.shards_held.set(len(held.held()))
            state.shards_changed(change)

        state.keeper = ShardKeeper(held, changed).start()
    state.readiness.started()


def _counted_tables(api_client: Any, config: Config) -> TableIndex:
    """The table index, told how many tables there are now (``handlers.table_index``); a
    count that fails or is not given makes it wait for its deadline, two intervals."""
    deadline = time.monotonic() + 2 * config.observe_interval_seconds
    try:
        expected = count_tables(api_client, GROUP, VERSION, PLURAL_TABLE, list(config.namespaces))
    except Exception as exc:  # any failure of the client: the deadline alone
        log.warning("cannot count the TxnTables at start (%s); policy statuses wait %.0f s",
                    type(exc).__name__, deadline - time.monotonic())  # fmt: skip
        expected = None
    return TableIndex(expected, deadline)


@kopf.on.probe(id="reconciles")
async def reconciles_probe(*, memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """Liveness detail: reconciles in flight and finished; fails when one is stuck."""
    state: State | None = getattr(memo, "state", None)
    if state is None:
        raise kopf.PermanentError("the startup handler has not finished")
    assert state.driver.liveness is not None  # made by the startup handler
    alive, details = state.driver.liveness.report(time.monotonic())
    if not alive:
        raise kopf.PermanentError(details["stuck"])
    return details


@kopf.on.cleanup(id="cleanup")
def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    state: State | None = getattr(memo, "state", None)
    for server in state.servers if state else ():
        server.stop()
    if state is not None:
        state.readiness.peering.uninstall()
    if state is not None and state.driver.events is not None:
        state.driver.events.close()
    if state is not None and state.ticks is not None:
        state.ticks.close()
    if state is not None and state.keeper is not None:
        # after the daemons' ticks; a timer's tick in Kopf's executor may still run: the
        # shards are given up first, and released only after the margin a write in flight
        # may take (``Shards.close``)
        state.keeper.close()


def _state(memo: kopf.Memo) -> State:
    state: State = memo.state
    return state


def _shed(body: kopf.Body) -> None:
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


def _without_status(body: kopf.Body) -> dict[str, Any]:
    """A policy as table ticks need it: a policy's status lists every table it matches, so
    keeping it would make each tick's policy reading grow with the number of tables."""
    return {k: v for k, v in body.items() if k != "status"}


@kopf.index(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="compaction_policies")
def compaction_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    _shed(body)
    return {namespace or "default": _without_status(body)}


@kopf.index(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="checkpoint_policies")
def checkpoint_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    _shed(body)
    return {namespace or "default": _without_status(body)}


def _mine(state: State, body: Mapping[str, Any]) -> bool:
    """Whether this replica maintains the object of ``body`` (``State.owns``)."""
    meta = body.get("metadata") or {}
    return state.owns(meta.get("namespace"), str(meta.get("name")))


def _drop_legacy_finalizer(body: kopf.Body, patch: kopf.Patch) -> None:
    """Remove Kopf's default finalizer left by an earlier release: nothing would ever remove
    it now that Kopf uses ours, so the object would hang in Terminating when deleted."""
    finalizers = list(body.get("metadata", {}).get("finalizers") or [])
    if LEGACY_FINALIZER in finalizers:
        kept = dict.fromkeys(f for f in finalizers if f != LEGACY_FINALIZER)  # order, no twins
        patch.metadata["finalizers"] = list(kept)


def _policy_timer(parse: Any, live: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    """Status of a policy: validity, matched tables, active and last runs, next schedule.
    One reading of the object serves the whole tick: a timer's body is a live view that Kopf
    replaces when a watch event of the object arrives, so the tick judges, patches and
    announces one version of it."""
    body = kopf.Body(cast(kopf.RawBody, dict(live)))
    state: State | None = getattr(kwargs.get("memo"), "state", None)
    if state is not None and not _mine(state, body):
        return  # another replica holds its shard and writes its status
    _drop_legacy_finalizer(body, patch)
    now = datetime.now(UTC)
    try:
        policy = parse(dict(body))
    except InvalidSpecError as exc:
        _say_invalid(body, patch, str(exc))
        return
    namespace = policy.metadata.namespace or "default"
    if state is not None and not state.tables.complete():
        return  # at start, before every table is listed: it would count too few
    parsed = state.parsed if state is not None else ParsedResources()
    kind = "compaction" if parse == CompactionPolicy.from_manifest else "checkpoint"
    rivals = parsed.parse_all(kwargs[f"{kind}_policies"].get(namespace), parse)
    kin = [*(p for p in rivals if p.metadata.name != policy.metadata.name), policy]
    views = state.governed if state is not None else GovernedViews()
    governed = views.governed(
        namespace,
        kind,
        state.tables.bodies(namespace) if state is not None else (),
        kin,
        lambda bodies: parsed.parse_all(bodies, TxnTable.from_manifest),
    )
    status = governed_status(policy, governed, now)
    rendered = policy.__class__(
        metadata=policy.metadata, spec=policy.spec, status=status
    ).to_status()
    if changed(body.get("status") or {}, rendered):
        patch.status.update(rendered)
        said = state.policies_said if state is not None else {}
        _announce_invalid(body, policy.status, status, said)


def _announce_invalid(body: kopf.Body, before: Any, after: Any, said: dict[str, str]) -> None:
    """One Warning Event when a policy becomes Invalid for a reason only the controller sees
    (a schedule that never fires), not one per tick: neither the status read nor this process
    (``said``: by policy uid, what it announced last; the status write may lag) said it."""
    key = str(body.get("metadata", {}).get("uid") or body.get("metadata", {}).get("name"))
    new = next((c for c in after.conditions if c.type == ConditionType.READY), None)
    if new is None or new.is_true or new.reason != Reason.INVALID_SPEC:
        said.pop(key, None)
        return
    old = next((c for c in before.conditions if c.type == ConditionType.READY), None)
    known = old is not None and old.reason == new.reason and old.message == new.message
    if known or said.get(key) == new.message:
        said[key] = new.message
        return
    said[key] = new.message
    kopf.event(body, type="Warning", reason=EventReason.INVALID_SPEC, message=new.message)


@kopf.on.event(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="judge-compaction-policy")
def judge_compaction_policy(
    *, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """Say at once that a new or edited policy is invalid, instead of at its timer's next
    firing (an event handler: Kopf keeps no record of it on the object)."""
    _judge_policy(CompactionPolicy.from_manifest, body, patch, memo)


@kopf.on.event(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="judge-checkpoint-policy")
def judge_checkpoint_policy(
    *, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    _judge_policy(CheckpointPolicy.from_manifest, body, patch, memo)


def _judge_policy(parse: Any, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo) -> None:
    """An invalid policy's conditions, written once per generation and reason: the event of
    our own write (or any later event of the same version of the spec) finds them said."""
    meta = body.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return  # a deletion's events, or a DELETED event's last body
    state: State | None = getattr(memo, "state", None)
    if state is not None and not _mine(state, body):
        return
    parsed = state.parsed if state is not None else ParsedResources()
    why = parsed.invalid([_without_status(body)], parse)
    for message in why.values():
        _say_invalid(body, patch, message)


def _say_invalid(body: kopf.Body, patch: kopf.Patch, message: str) -> None:
    """Patch in an invalid policy's conditions unless its status says them already (at each
    attempt the conditions' transition times are new: comparing them would write every time)."""
    generation = (body.get("metadata") or {}).get("generation")
    new = invalid_spec_status(generation, message, datetime.now(UTC))
    if not _said(body.get("status") or {}, new):
        patch.status.update(new)


def _said(status: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``status`` already says what ``new`` does, transition times aside."""

    def gist(s: Mapping[str, Any]) -> tuple[Any, ...]:
        conds = sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in s.get("conditions") or ()
        )
        return s.get("phase"), s.get("observedGeneration"), conds

    return gist(status) == gist(new)


# Handler ids must be unique across resources: Kopf mixes up handlers that share one.
@kopf.timer(
    GROUP,
    VERSION,
    PLURAL_COMPACTION_POLICY,
    id="compaction-policy-status",
    interval=CONFIG.observe_interval_seconds,
)
def compaction_policy_status(*, body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    _policy_timer(CompactionPolicy.from_manifest, body, patch, **kwargs)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL_CHECKPOINT_POLICY,
    id="checkpoint-policy-status",
    interval=CONFIG.observe_interval_seconds,
)
def checkpoint_policy_status(*, body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    _policy_timer(CheckpointPolicy.from_manifest, body, patch, **kwargs)


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
    _shed(body)
    state: State | None = getattr(memo, "state", None)
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
    state = _state(memo)
    if not _mine(state, body):
        return  # another replica's table (``handlers.shards``)
    _drop_legacy_finalizer(body, patch)
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
    state = _state(memo)
    meta = body.get("metadata", {})
    key = resource_key(meta.get("namespace", "default"), meta.get("name"), meta.get("uid"))
    wake = asyncio.Event()
    mine = state.memories.of(key, Driven)
    mine.waker = (asyncio.get_running_loop(), wake)
    mine.generation = meta.get("generation")  # a later one wakes it (``spec_changes``)
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
            if not _mine(state, body):
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
    if not _mine(state, body):
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
        return (wanted is None or wanted()) and _mine(state, body)

    interval = table.spec.observe_interval
    state.driver.tick(
        table, policies, current, interval=interval, woken=woken, sink=post, wanted=still_wanted
    )
    if not _mine(state, body):  # its shard went while it ticked: what the tick kept goes too
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
    state = _state(memo)
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
