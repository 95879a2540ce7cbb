"""The controller's start and stop in Kopf: Kopf's settings, the clients, the shared state.

The startup handler applies Kopf's settings once, builds what every handler shares (``State``
in Kopf's memo, ``handlers.kopf_glue``: the operator, the table and policy drivers with their
status writers, the commit events, the shards, the metrics server) and the handlers' own
Kubernetes client; the cleanup handler stops them. The login handler bounds the requests Kopf
keeps in flight; the probe handler adds to Kopf's liveness endpoint whether a reconcile is
stuck. Clients live in the memo, never in globals.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
from prometheus_client import CollectorRegistry

from txntable.api.constants import (
    FINALIZER,
    GROUP,
    PLURAL_CHECKPOINT_POLICY,
    PLURAL_COMPACTION_POLICY,
    PLURAL_TABLE,
    VERSION,
)
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.handlers.api_session import bounded_session
from txntable.handlers.commit_events import CommitEvents
from txntable.handlers.driver import Driver
from txntable.handlers.kopf_glue import CONFIG, State, started
from txntable.handlers.liveness import Liveness
from txntable.handlers.policy_driver import PolicyDriver, PolicyKind
from txntable.handlers.secret_cache import SecretCache
from txntable.handlers.secret_source import SecretCredentials, read_secret
from txntable.handlers.shards import (
    LEASE_SECONDS,
    Change,
    KubeLeases,
    ShardKeeper,
    Shards,
    run_share,
)
from txntable.handlers.status_writer import KubeStatus, StatusWriter
from txntable.handlers.table_index import TableIndex, count_tables
from txntable.handlers.tick_pool import TickPool
from txntable.launch import Backend, Launcher, make_launcher
from txntable.launch.run_cache import CachedRuns, ListsManagedRuns
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.observability.server import MetricsServer, register_process_collectors

log = logging.getLogger(__name__)

ENV_RUNS_DIR = "TXNTABLE_LOCAL_RUNS_DIR"
#: A reconcile running longer than this is stuck: the liveness probe fails, the pod restarts.
STUCK_RECONCILE_SECONDS = max(900.0, 30 * CONFIG.observe_interval_seconds)
#: how often Kopf looks again whether a deleted table's timer has exited (see ``startup``)
DELETION_RECHECK_SECONDS = 2.0
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


def _apply_settings(settings: kopf.OperatorSettings, config: Config) -> None:
    """Kopf's settings, applied once at start."""
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


def _launchers(config: Config, api_client: Any) -> Callable[[Backend], Launcher]:
    """The launcher of each backend, made on first use; a backend whose runs can be listed
    per namespace is listed once per interval for every table (``launch.run_cache``)."""
    launchers: dict[Backend, Launcher] = {}

    def launcher_for(backend: Backend) -> Launcher:
        if backend not in launchers:
            runs_dir = Path(os.environ.get(ENV_RUNS_DIR, "/tmp/txntable-runs"))
            made = make_launcher(backend, config, api_client=api_client, runs_dir=runs_dir)
            launchers[backend] = (
                CachedRuns(made, max_age=config.observe_interval_seconds)
                if isinstance(made, ListsManagedRuns)
                else made
            )
        return launchers[backend]

    return launcher_for


def _policy_driver(state: State, api_client: Any) -> PolicyDriver:
    """The policies' driver: a status writer per kind over the tables' memory."""
    memories = state.memories
    writers: dict[PolicyKind, StatusWriter] = {
        "compaction": StatusWriter(memories, KubeStatus(api_client, PLURAL_COMPACTION_POLICY)),
        "checkpoint": StatusWriter(memories, KubeStatus(api_client, PLURAL_CHECKPOINT_POLICY)),
    }
    return PolicyDriver(memories, writers, parsed=state.parsed)


def _shard(state: State, config: Config, metrics: ControllerMetrics) -> None:
    """Split the tables with the other replicas through Leases (``handlers.shards``): this
    replica's share of the run limit, its tables only, its shards kept by a keeper thread."""
    # a client of its own that never retries: a Lease request must end within its
    # timeout, inside the margin (``handlers.shards.REQUEST_SECONDS``)
    leases = KubeLeases(
        _api_client(2, retries=0), _own_namespace(), config.peering_name, LEASE_SECONDS
    )
    shards = state.shards = Shards(
        leases, identity=IDENTITY, set_name=config.peering_name, count=config.shards
    )
    state.operator.run_limit = lambda: run_share(
        config.max_concurrent_runs, len(shards.held()), shards.count
    )
    state.operator.launching.permit = lambda t: state.owns(t.metadata.namespace, t.metadata.name)

    def changed(change: Change) -> None:
        metrics.shards_held.set(len(shards.held()))
        state.shards_changed(change)

    state.keeper = ShardKeeper(shards, changed)


@kopf.on.startup(id="startup")
def startup(*, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = CONFIG
    _apply_settings(settings, config)
    # the daemons' ticks take as many threads as asyncio's default executor would
    ticks = TickPool(min(32, (os.cpu_count() or 1) + 4))
    api_client = _api_client((settings.execution.max_workers or 0) + ticks.threads + 4)
    registry = register_process_collectors(CollectorRegistry())
    metrics = ControllerMetrics(registry)
    operator = Operator(
        config=config,
        launchers=_launchers(config, api_client),
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
    state.policies = _policy_driver(state, api_client)
    if config.shards:
        _shard(state, config, metrics)
    else:
        state.readiness.peering.install()
    # /healthz is Kopf's liveness endpoint (python -m txntable --liveness); /metrics and
    # /readyz (not paused by peering) here
    state.servers = [
        MetricsServer(registry, config.metrics_port, ready=state.readiness.report).start()
    ]
    driver.events = CommitEvents(  # a table forgotten is unwatched by the driver
        state.wake,
        probe_interval=config.event_probe_interval_seconds,
        debounce=config.event_debounce_seconds,
        on_event=metrics.commit_event,
    ).start()
    memo.state = state
    if state.keeper is not None:
        state.keeper.start()
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
    state = started(memo)
    if state is None:
        raise kopf.PermanentError("the startup handler has not finished")
    assert state.driver.liveness is not None  # made by the startup handler
    alive, details = state.driver.liveness.report(time.monotonic())
    if not alive:
        raise kopf.PermanentError(details["stuck"])
    return details


@kopf.on.cleanup(id="cleanup")
def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    state = started(memo)
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
