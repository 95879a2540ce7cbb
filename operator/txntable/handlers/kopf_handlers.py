"""The only Kopf code: thin glue from Kopf events and timers to ``operate.Operator``.

Each handler parses the resource into its typed model, calls the shared reconcile, carries out
what it returns (status patch, Events) and returns None (Kopf would store a return value in the
status, which our strict status schema rejects). Every handler has a stable ``id=`` and is safe
to re-run. Settings are applied once at start-up; clients live in the memo, never in globals.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import kopf
from prometheus_client import CollectorRegistry

from txntable.api.conditions import (
    ConditionStatus,
    ConditionType,
    EventReason,
    Reason,
    set_condition,
)
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
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TablePhase, TxnTable
from txntable.config import Config
from txntable.handlers.commit_events import CommitEvents
from txntable.handlers.liveness import Liveness
from txntable.handlers.memory import TableMemories
from txntable.handlers.operate import Operator
from txntable.handlers.readiness import Readiness
from txntable.handlers.secret_cache import SecretCache, SecretData, SecretUnavailable
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
from txntable.reconcile.policy_status import policy_status
from txntable.reconcile.status import Failure

log = logging.getLogger(__name__)

ENV_RUNS_DIR = "TXNTABLE_LOCAL_RUNS_DIR"
CONFIG = Config.from_env()  # read once; kopf decorators below need the interval at import
#: Kopf's default finalizer, which earlier releases left on every object; ours replaced it.
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
#: A reconcile running longer than this is stuck: the liveness probe fails, the pod restarts.
STUCK_RECONCILE_SECONDS = max(900.0, 30 * CONFIG.observe_interval_seconds)


class ParsedResources:
    """Resources parsed once per resourceVersion. Every table tick reads every policy of its
    namespace and every policy tick every table: at 1,000 tables, parsing them again each time
    was most of the controller's steady CPU (bench/scale.py's profile)."""

    #: entries kept before the cache starts again (deleted resources' entries go with it)
    LIMIT = 20_000

    def __init__(self) -> None:
        self._parsed: dict[tuple[Any, str, str], Any] = {}

    def parse_all(self, store: Any, parse: Any) -> list[Any]:
        """``parse`` applied to each body of ``store``, skipping invalid ones (each reports
        its own error on itself, through its own handler; ``invalid`` lists them)."""
        return [found for _, found in self._each(store, parse) if not isinstance(found, str)]

    def invalid(self, store: Any, parse: Any) -> dict[str, str]:
        """The bodies of ``store`` that ``parse`` refuses: name -> why."""
        return {name: found for name, found in self._each(store, parse) if isinstance(found, str)}

    def _each(self, store: Any, parse: Any) -> list[tuple[str, Any]]:
        out = []
        for body in store or ():
            meta = body.get("metadata") or {}
            version = meta.get("resourceVersion")
            key = (parse, str(meta.get("uid") or meta.get("name")), str(version))
            if version is not None and key in self._parsed:
                found = self._parsed[key]
            else:
                try:
                    found = parse(body)
                except InvalidSpecError as exc:
                    found = str(exc)
                if version is not None:
                    if len(self._parsed) >= self.LIMIT:
                        self._parsed.clear()
                    self._parsed[key] = found
            out.append((str(meta.get("name")), found))
        return out


_UNREAD = object()


@dataclass
class Driven:
    """One table's sub-record of the Kopf driver (``handlers.memory``)."""

    #: held while the table is reconciled (the timer and the commit-events daemon)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: when the timer last ticked it (monotonic seconds)
    last_tick: float = -1e9
    #: its runs in flight after its last tick (the others' count toward the concurrency limit)
    active_runs: int = 0
    #: the resourceVersion of the Secret its cached table was opened with (unread: none yet)
    secret_version: object = _UNREAD
    #: how its commit-events daemon is woken
    waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None


@dataclass
class State:
    """What the handlers share, built once in the startup handler and kept in Kopf's memo.
    What is kept per table is in the operator's ``memories`` (``Driven`` for this module)."""

    config: Config
    operator: Operator
    api_client: Any = None
    metrics: ControllerMetrics | None = None
    servers: list[MetricsServer] = field(default_factory=list)
    liveness: Liveness = field(default_factory=lambda: Liveness(STUCK_RECONCILE_SECONDS))
    #: what /readyz answers: started, and Kopf not paused by peering
    readiness: Readiness = field(default_factory=Readiness)
    #: storage Secrets, each read again after secret_cache.DEFAULT_MAX_AGE (5 min)
    secrets: SecretCache | None = None
    #: commit events (handlers.commit_events)
    events: CommitEvents | None = None
    #: policies and tables parsed once per resourceVersion
    parsed: ParsedResources = field(default_factory=ParsedResources)
    #: per policy (uid): the reason it is Invalid that was announced last
    policies_said: dict[str, str] = field(default_factory=dict)

    @property
    def memories(self) -> TableMemories:
        return self.operator.memories

    def wake(self, key: str) -> None:
        """Wake ``key``'s commit-events daemon (called from the debounce thread)."""
        driven = self.memories.peek(key, Driven)
        if driven is not None and driven.waker is not None:
            loop, event = driven.waker
            loop.call_soon_threadsafe(event.set)


def _api_client() -> Any:
    """The handlers' own client (launchers, Secrets, status from the commit-events daemon), found
    as Kopf's login finds its own: in-cluster credentials, else ``KUBECONFIG``. Tests point
    both at their API server with a kubeconfig, so this is the only path there is."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call, unused-ignore]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call, unused-ignore]
    return client.ApiClient()


@kopf.on.login(id="login")
def login(**kwargs: Any) -> Any:
    return kopf.login_via_client(**kwargs)


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
    # A namespaced controller serves exactly the namespaces it is given, so it does not watch
    # Namespaces (nor CRDs) to find more: that needs cluster-wide permissions the chart does not
    # grant it, and without them Kopf retried the refused listing for about a minute at every
    # start before serving any table. Resources are discovered once, at start.
    settings.scanning.disabled = bool(config.namespaces)
    api_client = _api_client()
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
    state = State(config, operator, api_client, metrics=metrics)
    state.readiness.peering.install()
    state.secrets = SecretCache(lambda ns, name: _read_secret(api_client, ns, name))
    # /healthz is Kopf's liveness endpoint (python -m txntable --liveness); /metrics and
    # /readyz (not paused by peering) here
    state.servers = [
        MetricsServer(registry, config.metrics_port, ready=state.readiness.report).start()
    ]
    events = state.events = CommitEvents(
        state.wake,
        probe_interval=config.event_probe_interval_seconds,
        debounce=config.event_debounce_seconds,
        on_event=metrics.commit_event,
    ).start()
    operator.memories.on_forget(lambda key, _: events.unwatch(key))
    memo.state = state
    state.readiness.started()


@kopf.on.probe(id="reconciles")
async def reconciles_probe(*, memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """Liveness detail: reconciles in flight and finished; fails when one is stuck."""
    state: State | None = getattr(memo, "state", None)
    if state is None:
        raise kopf.PermanentError("the startup handler has not finished")
    alive, details = state.liveness.report(time.monotonic())
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
    if state is not None and state.events is not None:
        state.events.close()


def _state(memo: kopf.Memo) -> State:
    state: State = memo.state
    return state


def _without_status(body: kopf.Body) -> dict[str, Any]:
    """A policy as table ticks need it: a policy's status lists every table it matches, so
    keeping it would make each tick's policy reading grow with the number of tables."""
    return {k: v for k, v in body.items() if k != "status"}


@kopf.index(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="compaction_policies")
def compaction_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace or "default": _without_status(body)}


@kopf.index(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="checkpoint_policies")
def checkpoint_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace or "default": _without_status(body)}


@kopf.index(GROUP, VERSION, PLURAL_TABLE, id="tables")
def tables(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace or "default": dict(body)}


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
    _drop_legacy_finalizer(body, patch)
    now = datetime.now(UTC)
    try:
        policy = parse(dict(body))
    except InvalidSpecError as exc:
        new = _invalid_status(body, exc)
        new["phase"] = "Invalid"
        if _changed(body.get("status") or {}, new):
            patch.status.update(new)
        return
    namespace = policy.metadata.namespace or "default"
    state: State | None = getattr(kwargs.get("memo"), "state", None)
    parsed = state.parsed if state is not None else ParsedResources()
    found = parsed.parse_all(kwargs["tables"].get(namespace), TxnTable.from_manifest)
    index = "compaction_policies" if parse == CompactionPolicy.from_manifest else None
    index = index or "checkpoint_policies"
    rivals = parsed.parse_all(kwargs[index].get(namespace), parse)
    status = policy_status(policy, found, now, rivals)
    rendered = policy.__class__(
        metadata=policy.metadata, spec=policy.spec, status=status
    ).to_status()
    if _changed(body.get("status") or {}, rendered):
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


@kopf.on.create(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="validate-compaction-policy")
@kopf.on.update(
    GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="revalidate-compaction-policy", field="spec"
)
def validate_compaction_policy(*, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Reject an invalid policy once, as a condition, instead of at every table tick."""
    _validate_policy(CompactionPolicy.from_manifest, body, patch)


@kopf.on.create(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="validate-checkpoint-policy")
@kopf.on.update(
    GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="revalidate-checkpoint-policy", field="spec"
)
def validate_checkpoint_policy(*, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _validate_policy(CheckpointPolicy.from_manifest, body, patch)


def _validate_policy(parse: Any, body: kopf.Body, patch: kopf.Patch) -> None:
    try:
        parse(dict(body))
    except InvalidSpecError as exc:
        new = _invalid_status(body, exc)
        patch.status.update(new)
        raise kopf.PermanentError(f"invalid policy: {exc}") from exc


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


def _read_secret(api_client: Any, namespace: str, name: str) -> SecretData:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        secret = client.CoreV1Api(api_client).read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise SecretUnavailable(
                f"Secret {namespace}/{name} (spec.storage.secretRef) does not exist", missing=True
            ) from None
        why = "the controller may not read it" if exc.status == 403 else "it could not be read"
        raise SecretUnavailable(
            f"Secret {namespace}/{name} (spec.storage.secretRef): {why} "
            f"(HTTP {exc.status} {exc.reason or ''})".rstrip(),
            missing=False,
        ) from None
    data = secret.data or {}
    version = secret.metadata.resource_version if secret.metadata else None
    try:
        decoded = {k: base64.b64decode(v).decode("utf-8") for k, v in data.items()}
    except (ValueError, UnicodeDecodeError):
        raise SecretUnavailable(
            f"Secret {namespace}/{name} (spec.storage.secretRef): a value is not UTF-8 text",
            missing=False,
        ) from None
    return SecretData(decoded, version)


def _secret_options(state: State, key: str, table: TxnTable) -> dict[str, str]:
    """The table's storage options from its Secret (cached: ``SecretCache``). A Secret whose
    resourceVersion changed since the table was opened makes the controller open it again, so
    new credentials replace the old client, not only the options of a later open."""
    ref = table.spec.storage.secret_ref
    if ref is None:
        return {}
    namespace = table.metadata.namespace or "default"
    if state.secrets is None:
        state.secrets = SecretCache(lambda ns, name: _read_secret(state.api_client, ns, name))
    secret = state.secrets.get(namespace, ref.name)
    driven = state.memories.of(key, Driven)
    if driven.secret_version is not _UNREAD and driven.secret_version != secret.resource_version:
        log.info("Secret %s/%s changed: reopening the table", namespace, ref.name)
        state.operator.reopen(key)
    driven.secret_version = secret.resource_version
    return dict(secret.data)


def _storage_failed(status: Any) -> bool:
    """Whether the tick could not reach the table's storage (maybe stale credentials)."""
    return any(
        c.type == ConditionType.REACHABLE
        and c.reason == Reason.STORAGE_UNREACHABLE
        and c.status == ConditionStatus.FALSE
        for c in status.conditions
    )


def _invalid_status(body: kopf.Body, exc: InvalidSpecError) -> dict[str, Any]:
    now = datetime.now(UTC)
    generation = body.get("metadata", {}).get("generation")
    conds = set_condition(
        (),
        ConditionType.SPEC_VALID,
        False,
        Reason.INVALID_SPEC,
        str(exc),
        observed_generation=generation,
        now=now,
    )
    conds = set_condition(
        conds,
        ConditionType.READY,
        False,
        Reason.INVALID_SPEC,
        str(exc),
        observed_generation=generation,
        now=now,
    )
    return {
        "observedGeneration": generation,
        "phase": TablePhase.INVALID.value,
        "conditions": [c.to_dict() for c in conds],
    }


@kopf.on.create(GROUP, VERSION, PLURAL_TABLE, id="validate")
@kopf.on.update(GROUP, VERSION, PLURAL_TABLE, id="validate-update", field="spec")
def validate(*, body: kopf.Body, old: Any, patch: kopf.Patch, **_: Any) -> None:
    """Reject an invalid spec once, as a condition, instead of failing every timer tick."""
    old_body = {**dict(body), "spec": old} if isinstance(old, dict) else None
    try:
        TxnTable.from_manifest(dict(body), old=old_body)
    except InvalidSpecError as exc:
        patch.status.update(_invalid_status(body, exc))
        raise kopf.PermanentError(f"invalid TxnTable: {exc}") from exc


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
    """Observe the table's log, follow and start runs, and write the status if it changed."""
    _drop_legacy_finalizer(body, patch)
    new = _reconcile_table(body, memo, kwargs, woken=False)
    if new is not None:
        patch.status.update(new)


@kopf.daemon(GROUP, VERSION, PLURAL_TABLE, id="commit-events", cancellation_timeout=10.0)
async def commit_events(*, body: kopf.Body, memo: kopf.Memo, stopped: Any, **kwargs: Any) -> None:
    """Reconcile the table as soon as its commits are announced (handlers.commit_events),
    debounced; the ``reconcile`` timer stays the fallback. Status goes through the API."""
    state = _state(memo)
    meta = body.get("metadata", {})
    namespace, name = meta.get("namespace", "default"), meta.get("name")
    key = resource_key(namespace, name, meta.get("uid"))
    wake = asyncio.Event()
    state.memories.of(key, Driven).waker = (asyncio.get_running_loop(), wake)
    try:
        while not stopped:
            try:
                # a thousand idle daemons wake ~17 times a second in all; a stopping one is
                # cancelled by Kopf after cancellation_timeout if it sleeps here
                await asyncio.wait_for(wake.wait(), timeout=60.0)
            except TimeoutError:
                continue  # look at ``stopped`` again
            wake.clear()
            new = await asyncio.to_thread(_reconcile_table, body, memo, kwargs, woken=True)
            if new is not None and not stopped:
                await asyncio.to_thread(_patch_status, state.api_client, namespace, name, new)
    finally:
        driven = state.memories.peek(key, Driven)
        if driven is not None:
            driven.waker = None


def _patch_status(api_client: Any, namespace: str, name: str, status: dict[str, Any]) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL_TABLE, name, {"status": status}
        )
    except ApiException as exc:  # the timer writes it at its next tick
        log.warning("status of %s/%s not written (%s)", namespace, name, exc.status)


def _reconcile_table(
    body: kopf.Body, memo: kopf.Memo, kwargs: dict[str, Any], *, woken: bool
) -> dict[str, Any] | None:
    """One reconcile of the table; the status to write, or None when it has not changed.
    A ``woken`` call (commit events) skips the observe-interval gate of the timer."""
    state = _state(memo)
    started = time.monotonic()
    try:
        table = TxnTable.from_manifest(dict(body))
    except InvalidSpecError as exc:
        new = _invalid_status(body, exc)
        return new if _changed(body.get("status") or {}, new) else None
    key = table.metadata.key
    with state.memories.of(key, Driven).lock:
        return _reconcile_locked(state, body, table, key, kwargs, woken=woken, started=started)


def _reconcile_locked(
    state: State,
    body: kopf.Body,
    table: TxnTable,
    key: str,
    kwargs: dict[str, Any],
    *,
    woken: bool,
    started: float,
) -> dict[str, Any] | None:
    compaction_index: kopf.Index[str, dict[str, Any]] = kwargs["compaction_policies"]
    checkpoint_index: kopf.Index[str, dict[str, Any]] = kwargs["checkpoint_policies"]
    interval = max(table.spec.observe_interval, 0)
    driven = state.memories.of(key, Driven)
    if not woken and time.monotonic() - driven.last_tick < interval:
        return None
    driven.last_tick = time.monotonic()
    namespace = table.metadata.namespace or "default"
    comp_store, ckpt_store = compaction_index.get(namespace), checkpoint_index.get(namespace)
    comp = state.parsed.parse_all(comp_store, CompactionPolicy.from_manifest)
    ckpt = state.parsed.parse_all(ckpt_store, CheckpointPolicy.from_manifest)
    invalid = {
        "compaction": state.parsed.invalid(comp_store, CompactionPolicy.from_manifest),
        "checkpoint": state.parsed.invalid(ckpt_store, CheckpointPolicy.from_manifest),
    }
    others = sum(d.active_runs for k, d in state.memories.each(Driven) if k != key)
    failure = None
    try:
        options = _secret_options(state, key, table)
    except SecretUnavailable as exc:  # reported on the table, asked for again after a back-off
        options = {}
        reason = Reason.SECRET_NOT_FOUND if exc.missing else Reason.SECRET_UNREADABLE
        failure = Failure(reason, str(exc))
    state.liveness.begin(key, time.monotonic())
    try:
        with state.metrics.timed("table") if state.metrics else nullcontext():
            tick = state.operator.reconcile(
                table,
                comp,
                ckpt,
                storage_options=options,
                active_total=others,
                failure=failure,
                invalid_policies=invalid,
            )
    finally:
        state.liveness.end(key, time.monotonic())
    ref = table.spec.storage.secret_ref
    if ref is not None and state.secrets is not None and _storage_failed(tick.status):
        state.secrets.invalidate(namespace, ref.name)  # re-read credentials at the next tick
    driven.active_runs = tick.active_runs
    for event in tick.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)
    status = tick.status
    if state.events is not None:
        notifications = table.spec.notifications
        state.events.watch(
            key,
            table.spec.location,
            version=status.version,
            sqs_queue_url=notifications.sqs_queue_url if notifications else None,
            storage_options=dict(table.spec.storage.options) | options,
        )
        status = replace(status, observation=state.events.status(key))
        if state.metrics is not None:
            state.metrics.observation_mode(namespace, table.metadata.name, status.observation)
    new = _merge_patch(body.get("status") or {}, status.to_status())
    log.debug("reconciled %s in %.3fs (%s)", key, time.monotonic() - started, woken)
    return new if _changed(body.get("status") or {}, new) else None


def _changed(current: Any, new: dict[str, Any]) -> bool:
    return any(current.get(k) != v for k, v in new.items())


def _merge_patch(current: Any, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` as a JSON merge patch over ``current`` (how status is patched): a field the new
    status no longer has (``status.plan`` once no policy applies, ``backOffUntil`` once a
    back-off ended, a finished run's message) is sent as null, which deletes it; else the
    patch would keep it."""
    if not isinstance(current, dict):
        return new
    out: dict[str, Any] = dict(new)
    for k, old in current.items():
        if k not in new:
            out[k] = None
        elif isinstance(old, dict) and isinstance(new[k], dict):
            out[k] = _merge_patch(old, new[k])
    return out


@kopf.on.delete(GROUP, VERSION, PLURAL_TABLE, id="stop-runs")
def stop_runs(*, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a TxnTable stops its runs; it never touches the table's data or log."""
    state = _state(memo)
    meta = body.get("metadata", {})
    namespace, name = meta.get("namespace", "default"), meta.get("name")
    key = resource_key(namespace, name, meta.get("uid"))
    for backend in Backend:
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
