"""Commit events against polling: how soon a burst of small commits gets its compaction decided,
and what each mode costs in storage requests while a table is idle.

One local-disk table under a CompactionPolicy whose trigger is ``smallFiles: N``; a writer makes
N one-row commits as fast as it can; ``txntable run --local``'s loop (``cli.run_cmd.
reconcile_loop``, the same ``Operator.reconcile`` the Kopf handlers run) observes the table
either every ``interval`` seconds only (``polling``) or also when the LogProbe wakes it
(``events``, probe every 1 s, debounce 1 s, the defaults). Measured per trial: seconds from the
burst's last commit to the tick that launched compaction, and how many observations the burst
caused. Trials start at spread phases of the polling interval (a poll's wait depends on where
the burst falls in the interval).

The launcher records the request and reports the run Running without starting a process: what
is measured is the controller's decision, and a Spark or Arrow run would only add its own,
mode-independent start-up. Storage requests are counted on ``LocalStorage`` (listings and reads)
plus the probe's existence checks, over an idle minute (``quick``: 10 s) with no commits.
"""

from __future__ import annotations

import os
import platform
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.process import PeakRss, peak_cell

NAME = "commit_events"
BURST = 50


class _StopLoopError(Exception):
    pass


def _launcher_cls() -> Any:
    from txntable.launch.base import Launcher
    from txntable.launch.run import RunRequest, RunState, RunStatus

    class Recording(Launcher):
        """Records each launch and reports it Running (no process is started)."""

        def __init__(self) -> None:
            self.runs: list[RunStatus] = []
            self.launched_at: float | None = None

        def launch(self, req: RunRequest) -> RunStatus:
            self.launched_at = self.launched_at or time.monotonic()
            run = RunStatus(
                name=req.name,
                namespace=req.namespace,
                state=RunState.RUNNING,
                created=datetime.now(UTC),
                started=datetime.now(UTC),
                labels=dict(req.labels),
            )
            self.runs.append(run)
            return run

        def status(self, namespace: str, name: str) -> RunStatus:
            return next(r for r in self.runs if r.name == name)

        def delete(self, namespace: str, name: str) -> None:
            self.runs = [r for r in self.runs if r.name != name]

        def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
            return list(self.runs)

    return Recording


class _Counts:
    """Storage requests made through ``LocalStorage`` (listings, reads) while installed."""

    def __init__(self) -> None:
        self.lists = 0
        self.reads = 0

    def install(self) -> Any:
        from txntable.engine.storage import base as storage

        cls = storage.LocalStorage
        orig_list, orig_read = cls.list_dir, cls.read
        counts = self

        def list_dir(self: Any, relative_dir: str, start_at: str = "") -> Any:
            counts.lists += 1
            return orig_list(self, relative_dir, start_at)

        def read(self: Any, relative: str) -> bytes:
            counts.reads += 1
            return orig_read(self, relative)

        cls.list_dir, cls.read = list_dir, read  # type: ignore[method-assign]
        return lambda: setattr(cls, "list_dir", orig_list) or setattr(cls, "read", orig_read)


def _manifests(location: str, burst: int) -> Any:
    from txntable.api.policies import CompactionPolicy
    from txntable.api.table import TxnTable
    from txntable.cli.local_manifests import Manifests

    meta = {"namespace": "default", "uid": "bench-uid", "generation": 1}
    table = TxnTable.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": "events", **meta},
            "spec": {"location": location, "compactionPolicyRef": {"name": "burst"}},
        }
    )
    policy = CompactionPolicy.from_manifest(
        {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": "burst", **meta, "uid": "bench-policy"},
            "spec": {
                "minFileSize": "8Mi",
                "minInputFiles": 2,
                "triggers": {"smallFiles": burst, "cooldown": "1s"},
                "spark": {"backend": "Local"},
            },
        }
    )
    return Manifests(tables=[table], compaction=[policy])


def _loop(
    location: str, burst: int, interval: float, events: bool, stop: threading.Event
) -> tuple[Any, Any, list[float], threading.Thread]:
    """Start the local controller loop on ``location`` in a thread."""
    from txntable.cli.run_cmd import reconcile_loop
    from txntable.config import Config
    from txntable.controller.tick import Operator
    from txntable.handlers.commit_events import CommitEvents

    launcher = _launcher_cls()()
    operator = Operator(config=Config(), launchers=lambda _backend: launcher)
    hub = (
        CommitEvents(lambda _k: None, probe_interval=1.0, debounce=1.0).start() if events else None
    )
    ticks: list[float] = []

    def on_tick(_table: Any, _tick: Any) -> None:
        ticks.append(time.monotonic())
        if stop.is_set():
            raise _StopLoopError

    def body() -> None:
        try:
            reconcile_loop(
                _manifests(location, burst),
                operator,
                once=False,
                interval=interval,
                on_tick=on_tick,
                events=hub,
            )
        except _StopLoopError:
            pass
        finally:
            if hub is not None:
                hub.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return launcher, hub, ticks, thread


def _first_tick(ticks: list[float], thread: threading.Thread) -> None:
    while not ticks:
        if not thread.is_alive():
            raise RuntimeError("the controller loop stopped before its first tick")
        time.sleep(0.01)


def _trial(root: Path, burst: int, interval: float, events: bool, phase: float) -> dict[str, Any]:
    import pyarrow as pa

    from txntable.engine.table import Table

    schema = pa.schema([("id", pa.int64())])
    location = str(root)
    table = Table.create(location, schema)
    stop = threading.Event()
    launcher, _hub, ticks, thread = _loop(location, burst, interval, events, stop)
    _first_tick(ticks, thread)
    time.sleep(phase * interval)  # where in the polling interval the burst falls
    first = time.monotonic()
    for i in range(burst):
        table.append(pa.table({"id": [i]}, schema=schema))
    last = time.monotonic()
    before = len([t for t in ticks if t < last])
    deadline = last + interval * 3 + 10
    while launcher.launched_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    launched = launcher.launched_at
    time.sleep(0.5)  # the launching tick reports after its reconcile returns
    after = [t for t in ticks if t >= first]
    done = next((i for i, t in enumerate(after) if launched is not None and t >= launched), None)
    observations = len(after) if done is None else done + 1
    stop.set()
    thread.join(timeout=interval + 5)
    return {
        "burst_s": round(last - first, 3),
        "decided_after_s": None if launched is None else round(launched - last, 2),
        "observations": observations,
        "ticks_before": before,
    }


def _idle(root: Path, seconds: float, interval: float, events: bool) -> dict[str, Any]:
    import pyarrow as pa

    from txntable.engine.table import Table

    Table.create(str(root), pa.schema([("id", pa.int64())]))
    stop = threading.Event()
    counts = _Counts()
    _launcher, hub, ticks, thread = _loop(str(root), BURST, interval, events, stop)
    _first_tick(ticks, thread)
    restore = counts.install()
    probes0 = hub.stats.probes if hub is not None else 0
    try:
        time.sleep(seconds)
    finally:
        restore()
    probes = (hub.stats.probes if hub is not None else 0) - probes0
    stop.set()
    thread.join(timeout=interval + 5)
    per_minute = 60.0 / seconds
    return {
        "listings_per_min": round(counts.lists * per_minute, 1),
        "reads_per_min": round(counts.reads * per_minute, 1),
        "probes_per_min": round(probes * per_minute, 1),
        "requests_per_min": round((counts.lists + counts.reads + probes) * per_minute, 1),
    }


def run(quick: bool) -> dict[str, Any]:
    interval = 4.0 if quick else 30.0
    burst = 20 if quick else BURST
    phases = [0.5] if quick else [0.1, 0.4, 0.7]
    idle_s = 10.0 if quick else 60.0
    load_before = os.getloadavg()
    out: dict[str, Any] = {
        "interval_s": interval,
        "burst": burst,
        "probe_interval_s": 1.0,
        "debounce_s": 1.0,
        "modes": {},
    }
    with tempfile.TemporaryDirectory(prefix="txntable-bench-events-") as tmp:
        for mode in ("events", "polling"):
            with PeakRss(os.getpid()) as memory:  # the loop, its probe and the commits
                trials = [
                    _trial(Path(tmp) / f"{mode}-{i}", burst, interval, mode == "events", phase)
                    for i, phase in enumerate(phases)
                ]
                idle = _idle(Path(tmp) / f"{mode}-idle", idle_s, interval, mode == "events")
            out["modes"][mode] = {"trials": trials, "idle": idle, "memory": memory.figures()}
    out["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    return out


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"A burst of {result['burst']} one-row commits to a local table whose CompactionPolicy "
        f"triggers at `smallFiles: {result['burst']}`; polling interval "
        f"{result['interval_s']:g} s; events: LogProbe every {result['probe_interval_s']:g} s, "
        f"debounce {result['debounce_s']:g} s. Seconds from the burst's last commit to the "
        "tick that launched compaction, one trial per phase of the polling interval; idle "
        f"storage requests per table-minute. Machine: {m['cpus']} CPUs shared, load average "
        f"{m['load_before'][0]} before / {m['load_after'][0]} after, Python {m['python']}.",
        "",
        "| mode | burst (s) | decided after (s), per trial | observations per burst "
        "| idle listings/min | idle reads/min | idle probes/min | idle requests/min "
        "| peak RSS, MB (before) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, data in result["modes"].items():
        trials = data["trials"]
        decided = ", ".join(
            "none" if t["decided_after_s"] is None else f"{t['decided_after_s']:.2f}"
            for t in trials
        )
        observations = ", ".join(str(t["observations"]) for t in trials)
        burst_s = max(t["burst_s"] for t in trials)
        idle = data["idle"]
        peak = peak_cell(data.get("memory"))
        lines.append(
            f"| {mode} | {burst_s:.2f} | {decided} | {observations} | "
            f"{idle['listings_per_min']:g} | {idle['reads_per_min']:g} | "
            f"{idle['probes_per_min']:g} | {idle['requests_per_min']:g} | {peak} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run("--quick" in sys.argv), indent=2))
