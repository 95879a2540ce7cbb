"""Scale on the real API server: one controller replica, thousands of TxnTables (issue 30.2).

Why a second scale benchmark: ``bench.scale`` counts requests against kmock, which answers what
it emulates; a cluster's kube-apiserver and etcd add what kmock does not: a Kopf watch that the
server times out and Kopf restarts, list pagination, admission and schema validation of every
write, API priority and fairness (a 429 when the controller asks too much), and an audit log
written by the server, not by the benchmark. So here the controller runs as in
``tests/controlplane``: the chart installed by Helm's SDK on the control plane's kube-apiserver +
etcd, ``python -m txntable`` with the controller image's environment and a TokenRequest token
of the chart's ServiceAccount (``tests.controlplane.controller``), every request it makes
counted from the audit log by its user name.

Each case (``N`` tables) on a control plane of its own:

1. tables: ``N`` hard-linked copies of a small table (three commits, four files); 1% of them
   fragmented (twelve appends, 24 small files) under a CompactionPolicy that wants them
   compacted, on the Job backend: their runs are created and stay in flight (no Job controller
   here), up to the chart's ``maxConcurrentRuns``; the rest under idle policies. ``POLICIES``
   policies in all, half CompactionPolicies and half CheckpointPolicies, the tables spread
   over them round-robin; one storage Secret.
2. start-up: the controller starts; timed until every table has been observed once (its
   ``txntable_table_observed_timestamp_seconds`` gauge is set, read from /metrics).
3. settle: until Kopf has handled every TxnTable (its finalizer is on each) and an interval
   passes without a TxnTable metadata patch (Kopf's one-off writes).
4. the steady window, ``WINDOW_INTERVALS`` intervals: a probe commit every ``PROBE_EVERY``
   seconds to one of ``PROBE_TABLES`` tables in turn; the controller's requests in the window
   from the audit log, split into those naming a probed table (what commits cause) and the
   rest; its RSS and peak RSS from /proc; /metrics scraped every ``SCRAPE_EVERY`` seconds
   (the observed timestamps alone; everything every ``FULL_SCRAPE_EVERY`` seconds).
5. observation age: for each table, the largest gap between two successive values of its
   observed-timestamp gauge over start-up, settle and window, and from the last to the end. A
   scrape sees only the latest value, so two observations between scrapes count as one: the
   figure is an upper bound of the true largest gap (never below it).

Nothing here is asserted: the figures go to docs/benchmarks.md next to issue 30's goals
(peak RSS under 1 GB at 10,000 tables, at most 0.05 requests per table-minute beyond what
commits cause, every table observed within its interval + 10 s, no 429).

``python -m bench.scale_apiserver [--cases 300,1000] [--interval 30] [--json F]``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime as dt
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.read_snapshot import _machine
from bench.scale import LoadSampler, _link_table, _proc_stat, _template

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "bench" / "out" / "scale-apiserver"
GROUP, VERSION = "txntable.io", "v1alpha1"
NAMESPACE = "bench"
SYSTEM = "txntable-system"
POLICIES = 200
FRAGMENTED_SHARE = 0.01
WINDOW_INTERVALS = 3
SETTLE_MAX_INTERVALS = 10
PROBE_TABLES = 10
PROBE_EVERY = 3.0
SCRAPE_EVERY = 5.0
#: every so often a scrape of everything, as a Prometheus scraping every 30 s would make; the
#: others ask for the observed timestamps alone (``name[]``): a whole scrape at 10,000 tables
#: is 220,000 samples, 1.5 CPU-s of the controller, which every 5 s was a quarter of a core the
#: benchmark took, not a user
FULL_SCRAPE_EVERY = 30.0
OBSERVED = "txntable_table_observed_timestamp_seconds"
SCRAPE_TIMEOUT = 60.0
DEFAULT_CASES = (300, 1000)
DEFAULT_INTERVAL = 30.0
#: the chart's limit on runs in flight (values.yaml ``config.maxConcurrentRuns``)
MAX_CONCURRENT_RUNS = 4
_OBSERVED = re.compile(
    r'^txntable_table_observed_timestamp_seconds\{[^}]*table="([^"]+)"[^}]*\} (\S+)$', re.M
)


@dataclass
class Ages:
    """Each table's observed-timestamp values as scraped, and the largest gap between them."""

    last: dict[str, float] = field(default_factory=dict)
    gap: dict[str, float] = field(default_factory=dict)
    #: every gap seen, with the observed timestamp that ended it: the p95 and the phases
    gaps: list[tuple[float, float]] = field(default_factory=list)
    #: the observed timestamp that ended each table's largest gap (when it happened)
    gap_end: dict[str, float] = field(default_factory=dict)

    #: scrapes that timed out (a controller too busy to answer /metrics in SCRAPE_TIMEOUT)
    timeouts: int = 0
    #: when the last scrape of everything was (monotonic)
    full_at: float = -1e9

    def scrape(self, controller: Any) -> None:
        url = f"http://127.0.0.1:{controller.metrics_port}/metrics"
        if time.monotonic() - self.full_at >= FULL_SCRAPE_EVERY:
            self.full_at = time.monotonic()
        else:
            url += f"?name[]={OBSERVED}"
        try:
            with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as resp:
                self.add(bytes(resp.read()).decode())
        except TimeoutError:
            self.timeouts += 1

    def add(self, metrics: str) -> None:
        for name, value in _OBSERVED.findall(metrics):
            stamp = float(value)
            if stamp <= 0:
                continue
            before = self.last.get(name)
            if before is not None and stamp > before:
                if stamp - before > self.gap.get(name, 0.0):
                    self.gap[name], self.gap_end[name] = stamp - before, stamp
                self.gaps.append((stamp, stamp - before))
            self.last[name] = max(stamp, before or 0.0)

    def p95(self) -> float:
        """The 95th percentile of every gap seen (0 before any)."""
        ordered = sorted(g for _, g in self.gaps)
        return ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0

    def worst_since(self, since: float) -> float:
        """The largest gap that ended at or after ``since`` (wall-clock seconds)."""
        return max((g for at, g in self.gaps if at >= since), default=0.0)

    def worst(self, now: float) -> tuple[float, str]:
        """The largest gap of any table, counting the time since its last observation."""
        worst, who = 0.0, ""
        for name, last in self.last.items():
            age = max(self.gap.get(name, 0.0), now - last)
            if age > worst:
                worst, who = age, name
        return worst, who


def _names(n: int) -> list[str]:
    return [f"t{i:05d}" for i in range(n)]


def _fragmented_names(names: list[str]) -> set[str]:
    count = max(1, round(len(names) * FRAGMENTED_SHARE))
    step = max(1, len(names) // count)
    return set(names[::step][:count])


def _fragmented_template(directory: Path) -> Path:
    """Twelve small appends of two partitions: 24 files, version 12."""
    import pyarrow as pa

    from txntable.engine.table import Table

    location = directory / "fragmented"
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    table = Table.create(str(location), schema, partition_by=["part"])
    for i in range(12):
        ids = pa.array(range(i * 10, i * 10 + 10), pa.int64())
        table.append(pa.table({"id": ids, "part": pa.array(["a", "b"] * 5)}, schema=schema))
    return location


def _objects(
    names: list[str], fragmented: set[str], root: Path, interval: float
) -> list[dict[str, Any]]:
    meta = {"namespace": NAMESPACE}
    compaction = [f"compact-{i:03d}" for i in range(POLICIES // 2 - 1)]
    checkpoint = [f"checkpoint-{i:03d}" for i in range(POLICIES // 2)]
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "storage", **meta},
            "data": {"aws_region": "ZXUtd2VzdC0x"},  # read like any credentials Secret
        },
        _custom("CompactionPolicy", "fragmented", {
            "targetFileSize": "64Mi", "minFileSize": "8Mi",
            "triggers": {"smallFiles": 2, "cooldown": "1h"},
        }),
    ]  # fmt: skip
    out += [
        _custom("CompactionPolicy", name, {
            "targetFileSize": "64Mi", "minFileSize": "8Mi",
            "triggers": {"smallFiles": 1_000_000, "cooldown": "1h"},
        })
        for name in compaction
    ]  # fmt: skip
    out += [
        _custom("CheckpointPolicy", name, {
            "commitInterval": 1000, "mode": "Inline", "logCleanup": {"enabled": False},
        })
        for name in checkpoint
    ]  # fmt: skip
    for i, name in enumerate(names):
        policy = "fragmented" if name in fragmented else compaction[i % len(compaction)]
        out.append(
            _custom("TxnTable", name, {
                "location": str(root / name),
                "observeInterval": f"{int(interval)}s",
                "compactionPolicyRef": {"name": policy},
                "checkpointPolicyRef": {"name": checkpoint[i % len(checkpoint)]},
                "storage": {"secretRef": {"name": "storage"}},
            })
        )  # fmt: skip
    return out


def _custom(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


_PLURALS = {
    "TxnTable": "txntables",
    "CompactionPolicy": "compactionpolicies",
    "CheckpointPolicy": "checkpointpolicies",
}


def _create_all(api: Any, objects: list[dict[str, Any]], workers: int = 8) -> float:
    """Create the objects as the admin (policies and the Secret first); seconds taken."""
    from kubernetes import client

    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def create(obj: dict[str, Any]) -> None:
        if obj["kind"] == "Secret":
            core.create_namespaced_secret(NAMESPACE, obj)  # type: ignore[arg-type]
        else:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, _PLURALS[obj["kind"]], obj
            )

    started = time.monotonic()
    first = [o for o in objects if o["kind"] != "TxnTable"]
    tables = [o for o in objects if o["kind"] == "TxnTable"]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, first))
        list(pool.map(create, tables))
    return time.monotonic() - started


@dataclass(frozen=True)
class Request:
    """What the benchmark keeps of one audit event of the controller's."""

    audit_id: str
    verb: str
    resource: str
    subresource: str
    name: str
    code: int
    received: dt.datetime

    @property
    def what(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub}"


class AuditTail:
    """The controller's requests from the API server's audit log, read as it grows (a status
    write is logged with its request and response bodies: at ten thousand tables the log is
    hundreds of megabytes, so it is read once, line by line, keeping only ``Request``s)."""

    def __init__(self, path: Path, user: str) -> None:
        self.path, self.user = path, user
        self._offset = 0
        self._seen: set[str] = set()
        self.requests: list[Request] = []

    def read(self) -> list[Request]:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written stays for the next read
        self._offset += end
        for line in data[:end].splitlines():
            if self.user.encode() not in line:
                continue
            event = json.loads(line)
            if event.get("user", {}).get("username") != self.user:
                continue
            audit_id = str(event["auditID"])
            if audit_id in self._seen:  # ResponseStarted and ResponseComplete of a watch
                continue
            self._seen.add(audit_id)
            ref = event.get("objectRef") or {}
            self.requests.append(
                Request(
                    audit_id,
                    str(event["verb"]),
                    str(ref.get("resource") or event.get("requestURI", "?")),
                    str(ref.get("subresource") or ""),
                    str(ref.get("name") or ""),
                    int((event.get("responseStatus") or {}).get("code") or 0),
                    dt.datetime.fromisoformat(str(event["requestReceivedTimestamp"])),
                )
            )
        return self.requests


def measure(n: int, interval: float, directory: Path, heap: Path | None = None) -> dict[str, Any]:
    from tests.controlplane import binaries
    from tests.controlplane.controller import ControllerProcess, install_chart
    from tests.controlplane.plane import ControlPlane

    from txntable.engine.table import Table

    root = directory / f"n{n}"
    small = directory / "template"
    if not small.exists():
        _template(directory)
    frag = directory / "fragmented"
    if not frag.exists():
        _fragmented_template(directory)
    names = _names(n)
    fragmented = _fragmented_names(names)
    for name in names:
        _link_table(frag if name in fragmented else small, root / name)
    probes = [x for x in names if x not in fragmented][:PROBE_TABLES]
    logdir = LOGS / f"n{n}"
    shutil.rmtree(logdir, ignore_errors=True)
    plane = ControlPlane.start(binaries.CONTROLPLANE.find(), directory / f"plane-{n}", logdir)
    controller: ControllerProcess | None = None
    try:
        install = install_chart(
            plane,
            directory,
            release="txntable",
            namespace=SYSTEM,
            values={
                "watch": {"namespaces": [NAMESPACE]},
                "config": {
                    "observeIntervalSeconds": interval,
                    "defaultBackend": "job",
                    "logFormat": "text",
                    "maxConcurrentRuns": MAX_CONCURRENT_RUNS,
                },
            },
        )
        api = plane.client()
        create_s = _create_all(api, _objects(names, fragmented, root, interval))
        ages = Ages()
        with LoadSampler() as load:
            controller = ControllerProcess.start(
                plane, install, directory / f"controller-{n}", env=_heap_env(heap, n)
            )
            started = time.monotonic()
            deadline = started + 600 + n * 0.5
            while True:
                ages.scrape(controller)
                if len(ages.last) >= n:
                    break
                if time.monotonic() > deadline or controller.proc.poll() is not None:
                    raise RuntimeError(
                        f"{len(ages.last)} of {n} tables observed in "
                        f"{time.monotonic() - started:.0f} s\n{controller.logs()}"
                    )
                time.sleep(2.0)
            startup = time.monotonic() - started
            startup_cpu, _, startup_peak = _proc_stat(controller.proc.pid)
            audit = AuditTail(plane.audit_log, install.user)
            settle = _settle(audit, interval, ages, controller, api, n)
            window_start = dt.datetime.now(dt.UTC)
            window_wall = time.time()
            cpu0, _, _ = _proc_stat(controller.proc.pid)
            probed = _window(controller, ages, probes, root, interval * WINDOW_INTERVALS, Table)
            window_end = dt.datetime.now(dt.UTC)
            cpu1, rss, peak = _proc_stat(controller.proc.pid)
            worst, worst_table = ages.worst(time.time())
            if heap is not None:
                _heap_report(controller, heap.with_suffix(f".{n}.txt"))
        mine = audit.read()
        throttled = sum(1 for r in mine if r.code == 429)
        window = [r for r in mine if window_start <= r.received < window_end]
        caused = [r for r in window if r.name in set(probes)]
        beyond = [r for r in window if r.name not in set(probes)]
        jobs = [r for r in mine if r.what == "create jobs"]
        seconds = (window_end - window_start).total_seconds()
        table_minutes = n * seconds / 60
        return {
            "tables": n,
            "fragmented": len(fragmented),
            "policies": POLICIES,
            "interval_s": interval,
            "create_s": create_s,
            "startup_s": startup,
            "startup_cpu_s": startup_cpu,
            "startup_peak_rss_mb": startup_peak,
            "settle_s": settle,
            "window_s": seconds,
            "probe_commits": probed,
            "requests_window": len(window),
            "requests_commits": len(caused),
            "requests_beyond": len(beyond),
            "beyond_per_table_minute": len(beyond) / table_minutes,
            "beyond_by_verb": dict(collections.Counter(r.what for r in beyond).most_common()),
            "caused_by_verb": dict(collections.Counter(r.what for r in caused).most_common()),
            "requests_total": len(mine),
            "throttled_429": throttled,
            "throttled_by_verb": dict(
                collections.Counter(r.what for r in mine if r.code == 429).most_common()
            ),
            "requests_by_verb": dict(collections.Counter(r.what for r in mine).most_common(12)),
            "jobs_created": len(jobs),
            "cpu_cores_window": (cpu1 - cpu0) / seconds,
            "rss_mb": rss,
            "peak_rss_mb": peak,
            "max_observation_gap_s": worst,
            "max_gap_in_window_s": ages.worst_since(window_wall),
            "p95_observation_gap_s": ages.p95(),
            "max_gap_table": worst_table,
            "scrape_timeouts": ages.timeouts,
            "load_mean": sum(load.samples) / len(load.samples),
            "load_max": max(load.samples),
        }
    finally:
        if controller is not None:
            controller.stop()
        plane.stop()
        shutil.rmtree(root, ignore_errors=True)


def _heap_env(heap: Path | None, n: int) -> dict[str, str]:
    """The controller's environment for a heap report (``bench/heap_probe``), if asked for."""
    if heap is None:
        return {}
    report = heap.with_suffix(f".{n}.txt")
    report.unlink(missing_ok=True)
    return {
        "PYTHONPATH": str(Path(__file__).parent / "heap_probe"),
        "TXNTABLE_HEAP_REPORT": str(report),
        # more frames say who holds what, and slow the controller down many times over
        "TXNTABLE_HEAP_FRAMES": os.environ.get("TXNTABLE_HEAP_FRAMES", "1"),
    }


def _heap_report(controller: Any, report: Path, timeout: float = 900.0) -> None:
    """Ask the controller for its heap report and wait until it is written."""
    controller.proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if report.exists() and "pyarrow allocated" in report.read_text():
            print(report.read_text(), flush=True)
            return
        time.sleep(1.0)
    print(f"no heap report in {report} after {timeout:.0f} s", flush=True)


#: what Kopf writes on a new object, and since the controller has no change handler for a
#: live one, the only thing (kopf_handlers._being_deleted)
FINALIZER = f"{GROUP}/finalizer"


def _settle(
    audit: AuditTail, interval: float, ages: Ages, controller: Any, api: Any, n: int
) -> float:
    """Wait until Kopf has handled every TxnTable (each carries the controller's finalizer) and
    then an interval passes without the controller patching a TxnTable's metadata (Kopf's
    one-off writes of each new object), scraping on; seconds waited. A quiet interval alone
    was not enough: at 3,000 tables Kopf's handling paused for one and went on in the window."""
    from kubernetes import client

    started = time.monotonic()
    custom = client.CustomObjectsApi(api)

    def handled() -> int:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "txntables")
        marks = ((o.get("metadata") or {}).get("finalizers") or () for o in listed["items"])
        return sum(1 for f in marks if FINALIZER in f)

    def patches() -> int:
        return sum(1 for r in audit.read() if r.what == "patch txntables")

    for _ in range(SETTLE_MAX_INTERVALS):
        before = patches()
        _scrape_for(controller, ages, interval)
        if patches() == before and handled() >= n:
            break
    return time.monotonic() - started


def _scrape_for(controller: Any, ages: Ages, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ages.scrape(controller)
        time.sleep(min(SCRAPE_EVERY, max(0.0, end - time.monotonic())))


def _window(
    controller: Any, ages: Ages, probes: list[str], root: Path, seconds: float, table_cls: Any
) -> int:
    """Scrape every SCRAPE_EVERY s and commit to a probe table every PROBE_EVERY s, for
    ``seconds``; the number of probe commits."""
    import pyarrow as pa

    stop = threading.Event()
    commits = 0

    def probe() -> None:
        nonlocal commits
        i = 0
        while not stop.wait(PROBE_EVERY):
            table = table_cls.open(str(root / probes[i % len(probes)]))
            table.append(pa.Table.from_pylist([{}], schema=table.snapshot().schema))
            commits += 1
            i += 1

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        _scrape_for(controller, ages, seconds)
    finally:
        stop.set()
        thread.join()
    return commits


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}; controller at "
        f"{result['code']}; measured {result['measured']}; {result['wall_s'] / 60:.0f} min in "
        f"all. One controller process (the chart's environment and ServiceAccount) on the "
        f"control plane's kube-apiserver + etcd; requests from the server's audit log; "
        f"{POLICIES} policies, {FRAGMENTED_SHARE:.0%} of tables fragmented with runs in flight "
        f"(at most {MAX_CONCURRENT_RUNS}); a probe commit every {PROBE_EVERY:.0f} s in the "
        "window.",
        "",
        "| tables | interval | start-up: all observed (CPU) | peak RSS | RSS in window | "
        "requests / table-minute beyond commits | by commits | 429s | max observation gap "
        "(in window; p95) | cores in window | load avg (max) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['tables']} | {r['interval_s']:.0f} s | {r['startup_s']:.0f} s "
            f"({r['startup_cpu_s']:.0f} CPU-s) | {r['peak_rss_mb']:.0f} MB | "
            f"{r['rss_mb']:.0f} MB | {r['beyond_per_table_minute']:.4f} | "
            f"{r['requests_commits']} for {r['probe_commits']} commits | {r['throttled_429']} | "
            f"{r['max_observation_gap_s']:.1f} s ({r.get('max_gap_in_window_s', 0):.1f} s; "
            f"{r.get('p95_observation_gap_s', 0):.1f} s) | {r['cpu_cores_window']:.2f} | "
            f"{r['load_mean']:.1f} ({r['load_max']:.1f}) |"
        )
    rows = result["rows"]
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        slope = (b["rss_mb"] - a["rss_mb"]) * 2**20 / (b["tables"] - a["tables"])
        lines += ["", f"RSS slope from {a['tables']} to {b['tables']} tables: {slope:,.0f} bytes "
                  "per table."]  # fmt: skip
    lines += ["", "Requests beyond commits in the window, by verb:", ""]
    for r in rows:
        verbs = ", ".join(f"`{k}` {v}" for k, v in r["beyond_by_verb"].items()) or "none"
        lines.append(f"- {r['tables']} tables: {verbs}")
    lines += ["", "Requests the server answered 429, by verb (the whole run):", ""]
    for r in rows:
        verbs = ", ".join(f"`{k}` {v}" for k, v in r.get("throttled_by_verb", {}).items())
        lines.append(f"- {r['tables']} tables: {verbs or 'none'}")
    return "\n".join(lines)


def run(cases: tuple[int, ...], interval: float, heap: Path | None = None) -> dict[str, Any]:
    from bench.scale import controller_source

    started = time.time()
    LOGS.mkdir(parents=True, exist_ok=True)
    _, code = controller_source(None)
    directory = Path(tempfile.mkdtemp(prefix="tables-", dir=LOGS))
    try:
        rows = []
        for n in cases:
            rows.append(measure(n, interval, directory, heap))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "rows": rows,
        "code": code,
        "machine": _machine(),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.time() - started,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.scale_apiserver", description=__doc__)
    parser.add_argument(
        "--cases",
        default=",".join(map(str, DEFAULT_CASES)),
        help="comma-separated table counts, one control plane each",
    )
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL)
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    parser.add_argument(
        "--heap",
        type=Path,
        help="trace the controller's allocations and write what holds its memory after the "
        "window to HEAP.<tables>.txt (slower: tracemalloc)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = tuple(int(x) for x in args.cases.split(","))
    result = run(cases, args.interval, args.heap)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
