"""``txntable run --local DIR``: the controller's loop without a cluster.

Reads the TxnTable / CompactionPolicy / CheckpointPolicy manifests in DIR, then reconciles every
table on a timer exactly as the Kopf handlers do (``handlers.operate``), launching Spark in local
mode through the local launcher. Statuses live in memory and are printed when they change.
``--once`` stops when the work has converged: no run in flight and nothing started in a tick.
An invalid manifest stops the command before anything runs: every error of every manifest on
stderr, then exit status 2, as the API server would refuse the object.
Commit events (``handlers.commit_events``) wake a table between ticks, as in the cluster, unless
``--no-events``; ticks count the polling rounds only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txntable.cli.errors import CliError
from txntable.config import Config

# The API models, YAML and the controller are imported where they are used: every ``txntable``
# command registers this one, and building the parser must stay cheap.
if TYPE_CHECKING:
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
    from txntable.handlers.commit_events import CommitEvents
    from txntable.handlers.operate import Operator, Tick


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run the controller loop (local mode)")
    parser.add_argument("--local", metavar="DIR", required=True, help="manifests to reconcile")
    parser.add_argument("--once", action="store_true", help="stop when the work has converged")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between ticks")
    parser.add_argument("--max-ticks", type=int, default=0, help="stop after N ticks (0: never)")
    parser.add_argument(
        "--runs-dir", default=".txntable-runs", help="where local runs keep their state"
    )
    parser.add_argument("--json", action="store_true", help="print statuses as JSON lines")
    parser.add_argument(
        "--no-events",
        action="store_true",
        help="poll every --interval only; by default commits wake their table (LogProbe, SQS)",
    )
    parser.set_defaults(run=run)


@dataclass
class Manifests:
    tables: list[TxnTable] = field(default_factory=list)
    compaction: list[CompactionPolicy] = field(default_factory=list)
    checkpoint: list[CheckpointPolicy] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def load_manifests(directory: Path) -> Manifests:
    """Every manifest of ours under ``directory``; invalid ones (every broken field of each, or a
    misspelled kind) are reported, not fatal; other tools' objects (a Secret) are skipped."""
    import yaml

    from txntable.api.errors import InvalidSpecError
    from txntable.api.manifests import parse_manifest
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable

    if not directory.is_dir():
        raise CliError(f"{directory} is not a directory")
    out = Manifests()
    for path in sorted(directory.rglob("*.y*ml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            out.errors.append(f"{path}: not YAML ({exc})")
            continue
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind = doc.get("kind")
            metadata = doc.setdefault("metadata", {})
            if isinstance(metadata, dict):  # else from_manifest reports it
                metadata.setdefault("namespace", "default")
                metadata.setdefault("uid", f"local-{metadata.get('name')}")
                metadata.setdefault("generation", 1)
            try:
                resource = parse_manifest(doc)
            except InvalidSpecError as exc:
                name = metadata.get("name") if isinstance(metadata, dict) else None
                out.errors.append(f"{path}: {kind}/{name}: {exc}")
                continue
            if isinstance(resource, TxnTable):
                out.tables.append(resource)
            elif isinstance(resource, CompactionPolicy):
                out.compaction.append(resource)
            elif isinstance(resource, CheckpointPolicy):
                out.checkpoint.append(resource)
    return out


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


def _namespace(resource: TxnTable | CompactionPolicy | CheckpointPolicy) -> str:
    return resource.metadata.namespace or "default"


def _status_json(table: TxnTable, tick: Tick) -> str:
    return json.dumps(
        {
            "table": table.metadata.name,
            "namespace": _namespace(table),
            "status": tick.status.to_status(),
        },
        default=str,
    )


def make_operator(runs_dir: Path, config: Config) -> Operator:
    from txntable.handlers.operate import Operator
    from txntable.launch import Backend, Launcher, LocalLauncher

    launcher = LocalLauncher(runs_dir)

    def launchers(backend: Backend) -> Launcher:
        del backend  # local mode runs everything locally, whatever the policy says
        return launcher

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
) -> list[TxnTable]:
    """Reconcile every table each ``interval`` seconds, as the controller's timer does, and a
    table as soon as ``events`` wakes it (its ``on_wake`` is set here), as its daemon does.

    Returns the tables with their last status once converged (``once``) or after ``max_ticks``
    polling rounds.
    """
    tables = list(manifests.tables)
    woken: set[str] = set()
    wake = threading.Event()
    guard = threading.Lock()

    def on_wake(key: str) -> None:
        with guard:
            woken.add(key)
        wake.set()

    if events is not None:
        events.on_wake = on_wake
    last: dict[str, float] = {}
    busy: dict[str, bool] = {}
    ticks = 0
    while True:
        with guard:
            now_woken = set(woken)
            woken.clear()
        wake.clear()
        polled = False
        for i, table in enumerate(tables):
            key = table.metadata.key  # two tables of one name in two namespaces are two
            due = time.monotonic() - last.get(key, -math.inf) >= interval
            if not due and key not in now_woken:
                continue
            polled = polled or due
            last[key] = time.monotonic()
            # as in the cluster: a table sees only the policies of its own namespace
            ns = _namespace(table)
            tick = operator.reconcile(
                table,
                [p for p in manifests.compaction if _namespace(p) == ns],
                [p for p in manifests.checkpoint if _namespace(p) == ns],
            )
            if events is not None:
                tick = replace(tick, status=_observed(events, key, table, tick))
            tables[i] = replace(table, status=tick.status)
            if on_tick is not None:
                on_tick(table, tick)
            busy[key] = bool(tick.launched) or tick.active_runs > 0
        ticks += polled
        if polled and ((once and not any(busy.values())) or (max_ticks and ticks >= max_ticks)):
            return tables
        next_poll = min(last.values(), default=time.monotonic()) + interval
        wake.wait(timeout=max(0.0, next_poll - time.monotonic()))


def _observed(events: CommitEvents, key: str, table: TxnTable, tick: Tick) -> Any:
    """The tick's status with its observation mode, after telling ``events`` the version."""
    notifications = table.spec.notifications
    events.watch(
        key,
        table.spec.location,
        version=tick.status.version,
        sqs_queue_url=notifications.sqs_queue_url if notifications else None,
        storage_options=table.spec.storage.options,
    )
    return replace(tick.status, observation=events.status(key))


def run(args: argparse.Namespace) -> int:
    manifests = load_manifests(Path(args.local))
    if manifests.errors:
        # as ``kubectl apply`` refuses an invalid object: nothing runs on a partial set of
        # manifests (a dropped policy would silently leave its tables unmaintained)
        for error in manifests.errors:
            print(f"invalid manifest: {error}", file=sys.stderr)
        raise CliError(
            f"{len(manifests.errors)} invalid manifest(s) in {args.local}; nothing was reconciled"
        )
    if not manifests.tables:
        raise CliError(f"no valid TxnTable manifest in {args.local}")
    operator = make_operator(Path(args.runs_dir), Config.from_env())
    printed: dict[str, str] = {}

    def show(table: TxnTable, tick: Tick) -> None:
        name = table.metadata.namespaced_name
        for event in tick.events:
            print(f"event {name} {event.type} {event.reason}: {event.message}")
        line = _status_json(table, tick) if args.json else _summary(table, tick)
        if printed.get(table.metadata.key) != line:
            print(line, flush=True)
            printed[table.metadata.key] = line

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
            on_tick=show,
            events=events,
        )
    finally:
        if events is not None:
            events.close()
    return 0
