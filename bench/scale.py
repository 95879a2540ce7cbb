"""Scale benchmark: the real controller process (``python -m txntable``) against kmock, N tables.

One controller must follow thousands of TxnTables: its API traffic, memory and CPU must stay
small per table while nothing needs doing, and it must still notice a new commit within about
one observe interval. This benchmark measures exactly that from outside the process: kmock's
Kubernetes emulator runs in a child process of its own (``RemoteEmulator``) and counts every
request the controller makes; the controller is a separate ``python -m txntable`` process whose
RSS and CPU time come from ``/proc``. Each table is a small local Delta table (a copy of one
template) with policies that have nothing to do (no small-file backlog, no checkpoint due) and a
storage Secret, so what is counted is the steady cost of watching N idle tables.

A case may make some of its tables big: hard links to the read-path benchmark's 100,000-file
table (``bench.gen``: a generated log of 10,000 commits and a delta-rs checkpoint, no data files;
the same table ``bench.controller_memory`` uses), spread evenly over the N names. Their files are
small, so the compaction policy's small-file trigger is set above 100,000 to keep them idle too.

Phases for each case: start the controller; wait until every table has a status (the first
observation of all N, "warm-up"); wait until an interval passes without a TxnTable metadata
patch (``_settle``: Kopf's one-off writes of new objects); count requests, CPU and RSS over a
window of ``WINDOW_INTERVALS`` observe intervals ("steady"); then commit once to a sample of
tables and time how long each status takes to show the new version ("observation lag",
compared with the interval). The 1-minute load average is sampled every few seconds through
the whole case: the machine is shared, so CPU is reported as the controller's CPU-seconds
(``/proc``), which other load disturbs less than wall time.

``python -m bench.scale [--quick] [--cases 100,300,1000,1000x50] [--interval S] [--at REV]``
prints Markdown (``NxB``: N tables of which B are big; ``--at``: the controller of commit REV,
exported with ``git archive``, instead of the checkout's); ``make bench`` runs ``FULL_CASES``
(about 15 minutes on 2 cores) and records them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tests.kubeconfig import write_kubeconfig

from bench.gen import TableSpec, table_path
from bench.read_snapshot import _machine

NAME = "scale"

#: (tables, of them big) and observe interval of a full run (``make bench``) and of a quick one
FULL_CASES = ((100, 0), (300, 0), (1000, 0), (1000, 50))
FULL_INTERVAL = 30.0
QUICK_CASES = ((10, 0),)
QUICK_INTERVAL = 5.0
#: observe intervals counted in the steady window
WINDOW_INTERVALS = 3
#: observe intervals waited at most for the startup writes to end before the steady window
SETTLE_MAX_INTERVALS = 10
#: tables that get a commit in the lag phase (at most)
LAG_SAMPLE = 40
NAMESPACE = "bench"
#: the big tables' source: 100,000 live files, 100 partitions, checkpoint + 10 commits
BIG = TableSpec()
#: seconds between load-average samples
LOAD_EVERY = 5.0

TABLES = "txntable.io/v1alpha1/txntables"
COMPACTION = "txntable.io/v1alpha1/compactionpolicies"
CHECKPOINT = "txntable.io/v1alpha1/checkpointpolicies"
SPARKAPPS = "sparkoperator.k8s.io/v1beta2/sparkapplications"
SECRETS = "v1/secrets"
PEERINGS = "kopf.dev/v1/clusterkopfpeerings"
REPO = Path(__file__).resolve().parents[1]
#: the controller's log of the last run of each size (git-ignored)
LOGS = REPO / "bench" / "out" / "scale"

T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _counting_emulator(verbs: list[str]) -> Any:
    """kmock's emulator (whose objects have uids, as Kopf needs: ``tests.kmock_emulator``) that
    appends each request's ``verb resource`` to ``verbs`` and forgets the request once answered
    (see ``Emulator`` for why)."""
    from tests.kmock_emulator import ApiServerEmulator

    class CountingEmulator(ApiServerEmulator):
        async def _handle(self, request: Any) -> Any:
            verbs.append(_verb(request))
            try:
                return await super()._handle(request)
            finally:
                # routed and answered: out of the history (kmock's Root and its reactions)
                for history in (self._requests, *(r._requests for r in self._payloads)):
                    history[:] = [r for r in history if r is not request]

    return CountingEmulator()


class Emulator:
    """kmock's KubernetesEmulator served on a local port from a background event loop.

    Every access to the emulator's objects and requests goes through ``call`` (run on that
    loop), so this thread never reads them while the server is changing them.

    kmock keeps every request it served and, to route each new one, tests its membership in
    that whole history (``request in view`` walks the list through the view's filters): its
    cost per request grows with the requests served so far. With 300 tables that saturated a
    core and made its replies time out (the controller's list calls were retried, inflating the
    count). So the emulator here (``_counting_emulator``) notes each request's ``verb resource``
    in ``verbs`` as it arrives and drops the request from kmock's history once it is answered:
    the history holds only the requests in progress (mostly the controller's watches).
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.kmock: Any = None
        self.url = ""
        #: ``verb resource`` of every request served, in order of arrival
        self.verbs: list[str] = []
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        from kmock import Server

        self._stop = asyncio.Event()
        async with _counting_emulator(self.verbs) as kmock, Server(kmock) as server:
            self.kmock = kmock
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Emulator:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("kmock did not start within 30 s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def call(self, fn: Callable[[Emulator], T]) -> T:
        async def run() -> T:
            return fn(self)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=600)


def _seed(emu: Emulator, objects: dict[tuple[str, str | None, str], dict[str, Any]]) -> None:
    _register(emu.kmock)
    for key, body in objects.items():
        emu.kmock.objects[key] = body


def _request_count(emu: Emulator) -> int:
    return len(emu.verbs)


def _requests_by_verb(emu: Emulator, first: int, last: int | None) -> dict[str, int]:
    return dict(collections.Counter(emu.verbs[first:last]))


def _command(name: str) -> Callable[..., Any]:
    """What the benchmark may ask of the emulator process, by name."""
    commands: dict[str, Callable[..., Any]] = {
        "seed": _seed,
        "statuses": _statuses,
        "count": _request_count,
        "by_verb": _requests_by_verb,
    }
    return commands[name]


def _apply(fn: Callable[..., Any], args: tuple[Any, ...], emu: Emulator) -> Any:
    return fn(emu, *args)


def _serve_child(conn: Any) -> None:
    """The emulator's own process: answers ``(command, args)`` messages until ``stop``."""
    with Emulator() as emu:
        conn.send(emu.url)
        while True:
            command, args = conn.recv()
            if command == "stop":
                return
            conn.send(emu.call(functools.partial(_apply, _command(command), args)))


class RemoteEmulator:
    """``Emulator`` in a child process, so that kmock has its own interpreter (and GIL): with
    a thousand tables its event loop is busy, and it must not compete with this process."""

    def __enter__(self) -> RemoteEmulator:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_child, args=(child,), daemon=True)
        self._proc.start()
        if not self._conn.poll(60):
            raise RuntimeError("kmock did not start within 60 s")
        self.url: str = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(("stop", ()))
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()

    def call(self, command: str, *args: Any) -> Any:
        self._conn.send((command, args))
        if not self._conn.poll(600):
            raise RuntimeError(f"kmock did not answer {command!r} within 600 s")
        return self._conn.recv()


def _register(kmock: Any) -> None:
    ro = ["list", "watch", "get"]
    resources = kmock.resources
    resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = {
        "kind": "CustomResourceDefinition",
        "namespaced": False,
        "verbs": ro,
    }
    resources["v1/namespaces"] = {"kind": "Namespace", "namespaced": False, "verbs": ro}
    resources["v1/events"] = {"kind": "Event", "namespaced": True, "verbs": ["create", "list"]}
    # python -m txntable peers by name (settings.peering.mandatory): it needs its peering kind
    resources[PEERINGS] = {
        "kind": "ClusterKopfPeering",
        "namespaced": False,
        "verbs": ["list", "watch", "get", "patch"],
    }
    resources[SECRETS] = {"kind": "Secret", "namespaced": True, "verbs": ["get", "list"]}
    rw = ["list", "watch", "get", "patch", "create", "delete", "update"]
    for key, kind in (
        (TABLES, "TxnTable"),
        (COMPACTION, "CompactionPolicy"),
        (CHECKPOINT, "CheckpointPolicy"),
    ):
        resources[key] = {"kind": kind, "namespaced": True, "verbs": rw, "subresources": ["status"]}
    resources[SPARKAPPS] = {
        "kind": "SparkApplication",
        "namespaced": True,
        "verbs": ["list", "get", "create", "delete", "watch"],
    }


def _template(directory: Path) -> Path:
    """A small partitioned table of three commits (four files), written by our engine."""
    import pyarrow as pa

    from txntable.engine.table import Table

    location = directory / "template"
    data = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "p": ["a", "b", "a", "b"]})
    table = Table.create(str(location), data.schema, partition_by=["p"])
    table.append(data)
    table.append(data)
    return location


def _objects(
    n: int, tables: Path, interval: float
) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    meta = {"namespace": NAMESPACE, "resourceVersion": "1"}
    out: dict[tuple[str, str | None, str], dict[str, Any]] = {
        (PEERINGS, None, "txntable"): {
            "apiVersion": "kopf.dev/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": "txntable", "resourceVersion": "1"},
            "status": {},
        },
        (COMPACTION, NAMESPACE, "compact"): {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CompactionPolicy",
            "metadata": {"name": "compact", **meta},
            "spec": {
                "targetFileSize": "64Mi",
                "minFileSize": "8Mi",
                # above the big tables' 100,000 small files: every table stays idle
                "triggers": {"smallFiles": 1_000_000, "cooldown": "1h"},
                "spark": {"backend": "SparkApplication"},
            },
        },
        (CHECKPOINT, NAMESPACE, "ckpt"): {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "CheckpointPolicy",
            "metadata": {"name": "ckpt", **meta},
            "spec": {"commitInterval": 1000, "mode": "Inline", "logCleanup": {"enabled": False}},
        },
        (SECRETS, NAMESPACE, "storage"): {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "storage", **meta},
            # harmless for local tables; read like any credentials Secret
            "data": {"aws_region": "ZXUtd2VzdC0x"},  # eu-west-1
        },
    }
    for i in range(n):
        name = f"t{i:04d}"
        out[TABLES, NAMESPACE, name] = {
            "apiVersion": "txntable.io/v1alpha1",
            "kind": "TxnTable",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1, **meta},
            "spec": {
                "location": str(tables / name),
                "observeInterval": f"{int(interval)}s",
                "compactionPolicyRef": {"name": "compact"},
                "checkpointPolicyRef": {"name": "ckpt"},
                "storage": {"secretRef": {"name": "storage"}},
            },
        }
    return out


def _proc_stat(pid: int) -> tuple[float, float, float]:
    """(CPU seconds, RSS MB, peak RSS MB) of process ``pid`` from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def _verb(request: Any) -> str:
    """``verb resource[/subresource]`` of a request, in kubectl's words (get, list, patch ...)."""
    method = str(getattr(request.method, "value", request.method)).lower()
    action = str(getattr(request.action, "value", request.action or method)).lower()
    verb = {"fetch": "get", "update": method, "create": "create"}.get(action, action)
    resource = request.resource.plural if request.resource is not None else request.url.path
    sub = f"/{request.subresource}" if request.subresource else ""
    return f"{verb} {resource}{sub}"


def _statuses(emu: Emulator) -> dict[str, dict[str, Any]]:
    out = {}
    for (resource, _ns, name), obj in list(emu.kmock.objects.items()):
        if resource.plural == "txntables":
            with contextlib.suppress(ValueError):  # soft-deleted
                out[name] = dict(obj.get("status") or {})
    return out


@contextlib.contextmanager
def _controller(
    url: str, interval: float, logs: Path, source: Path
) -> Iterator[subprocess.Popen[bytes]]:
    if not (source / "txntable" / "__init__.py").exists():
        raise RuntimeError(f"no txntable package in {source}")
    kubeconfig = write_kubeconfig(logs.with_suffix(".kubeconfig"), url, "bench")
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        # sources before KUBECONFIG was the only way in read this test-only variable instead
        "TXNTABLE_TEST_APISERVER": url,
        "TXNTABLE_OBSERVE_INTERVAL_SECONDS": str(interval),
        "TXNTABLE_METRICS_PORT": str(_free_port()),
        "TXNTABLE_HEALTH_PORT": str(_free_port()),
        "TXNTABLE_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(source),
    }
    with logs.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "txntable"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _link_table(source: Path, target: Path) -> None:
    """``target`` as a copy of the Delta table ``source`` made of hard links (falling back to
    copies across file systems). Safe because nothing rewrites a log or data file in place: a
    commit or checkpoint is a new file. ``_last_checkpoint`` is rewritten, so it is copied."""
    try:
        shutil.copytree(source, target, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        return
    hint = target / "_delta_log" / "_last_checkpoint"
    if hint.exists():
        hint.unlink()
        shutil.copyfile(source / "_delta_log" / "_last_checkpoint", hint)


def big_names(n: int, big: int) -> set[str]:
    """Which of the ``n`` tables are big: ``big`` of them spread evenly, the first included."""
    if big <= 0:
        return set()
    step = max(1, n // big)
    return {f"t{i:04d}" for i in range(0, n, step)[:big]}


class LoadSampler:
    """The 1-minute load average every ``LOAD_EVERY`` seconds, in a thread, while in use."""

    def __init__(self) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(LOAD_EVERY):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def measure(
    n: int,
    interval: float,
    directory: Path,
    *,
    big: int = 0,
    big_spec: TableSpec = BIG,
    window_intervals: int = WINDOW_INTERVALS,
    lag_sample: int = LAG_SAMPLE,
    source: Path = REPO / "operator",
) -> dict[str, Any]:
    """One controller process with ``n`` idle tables, ``big`` of them ``big_spec`` tables; see
    the module docstring for the phases."""
    tables = directory / f"n{n}x{big}"
    template = directory / "template"
    if not template.exists():
        _template(directory)
    bigs = big_names(n, big)
    big_source = table_path(big_spec) if bigs else None
    for i in range(n):
        name = f"t{i:04d}"
        if name in bigs and big_source is not None:
            _link_table(big_source, tables / name)
        else:
            shutil.copytree(template, tables / name)
    objects = _objects(n, tables, interval)
    with LoadSampler() as load, RemoteEmulator() as emu:
        emu.call("seed", objects)
        logs = LOGS / f"controller-{n}x{big}.log"
        logs.parent.mkdir(parents=True, exist_ok=True)
        with _controller(emu.url, interval, logs, source) as proc:
            started = time.monotonic()
            deadline = started + 4 * interval + 120 + n * 0.2 + len(bigs) * 10
            while True:
                seen = emu.call("statuses")
                observed = sum(1 for s in seen.values() if "version" in s)
                if observed == n:
                    break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(
                        f"only {observed} of {n} tables observed in "
                        f"{time.monotonic() - started:.0f} s; log: {logs}"
                    )
                time.sleep(1.0)
            warmup = time.monotonic() - started
            warmup_cpu, _, _ = _proc_stat(proc.pid)
            warmup_requests = emu.call("by_verb", 0, emu.call("count"))
            settled = _settle(emu, interval)
            first = emu.call("count")
            cpu0, _, _ = _proc_stat(proc.pid)
            window_started = time.monotonic()
            time.sleep(window_intervals * interval)
            window = time.monotonic() - window_started
            cpu1, rss, peak = _proc_stat(proc.pid)
            last = emu.call("count")
            counts = collections.Counter(emu.call("by_verb", first, last))
            lags = _observation_lags(emu, tables, min(n, lag_sample), interval)
            observation = collections.Counter(
                "{mode} ({source})".format_map(collections.defaultdict(str, s["observation"]))
                if s.get("observation")
                else "(none)"
                for s in emu.call("statuses").values()
            )
            _, rss_after, peak_after = _proc_stat(proc.pid)
            if proc.poll() is not None:
                raise RuntimeError(f"the controller exited ({proc.returncode}); log: {logs}")
    table_minutes = n * window / 60
    all_lags = sorted(lags.values())
    return {
        "tables": n,
        "big_tables": len(bigs),
        "big_files": big_spec.active_files if bigs else 0,
        "interval_s": interval,
        "warmup_s": warmup,
        "warmup_cpu_s": warmup_cpu,
        "warmup_requests": dict(collections.Counter(warmup_requests).most_common()),
        "settle_s": settled,
        "requests_before": first,
        "window_s": window,
        "requests": dict(counts.most_common()),
        "requests_per_table_minute": sum(counts.values()) / table_minutes,
        "cpu_s": cpu1 - cpu0,
        "cpu_s_per_table_minute": (cpu1 - cpu0) / table_minutes,
        "cpu_cores": (cpu1 - cpu0) / window,
        "rss_mb": max(rss, rss_after),
        "peak_rss_mb": max(peak, peak_after),
        "lag_s": all_lags,
        "lag_p50_s": percentile(all_lags, 50),
        "lag_p95_s": percentile(all_lags, 95),
        "lag_big_s": sorted(v for k, v in lags.items() if k in bigs),
        "observation": dict(observation),
        "load_mean": statistics.fmean(load.samples),
        "load_max": max(load.samples),
    }


def _settle(emu: RemoteEmulator, interval: float) -> float:
    """Wait until an interval passes without a metadata patch of a TxnTable; the seconds waited.

    Kopf writes each object a few times when it first handles it (finalizer, progress and
    diff-base annotations). With big tables the first loads keep the process busy and these
    writes trail the first observation by minutes; they are a one-off cost, not the steady
    one, so the steady window starts after them (at most ``SETTLE_MAX_INTERVALS``)."""
    started = time.monotonic()
    for _ in range(SETTLE_MAX_INTERVALS):
        before = emu.call("by_verb", 0, None).get(f"patch {TABLES.rsplit('/', 1)[1]}", 0)
        time.sleep(interval)
        after = emu.call("by_verb", 0, None).get(f"patch {TABLES.rsplit('/', 1)[1]}", 0)
        if after == before:
            break
    return time.monotonic() - started


def _observation_lags(
    emu: RemoteEmulator, tables: Path, sample: int, interval: float
) -> dict[str, float]:
    """Commit once to ``sample`` tables; seconds until each one's status shows the version."""
    import pyarrow as pa

    from txntable.engine.table import Table

    committed: dict[str, tuple[int, float]] = {}
    for i in range(sample):
        name = f"t{i:04d}"
        table = Table.open(str(tables / name))
        # one row in the table's own schema (the template's or the generated big table's)
        row = pa.Table.from_pylist([{}], schema=table.snapshot().schema)
        result = table.append(row)
        committed[name] = (result.version, time.monotonic())
    lags: dict[str, float] = {}
    deadline = time.monotonic() + 3 * interval + 60
    while len(lags) < len(committed) and time.monotonic() < deadline:
        seen = emu.call("statuses")
        now = time.monotonic()
        for name, (version, at) in committed.items():
            if name not in lags and (seen.get(name, {}).get("version") or -1) >= version:
                lags[name] = now - at
        time.sleep(0.5)
    if len(lags) < len(committed):
        raise RuntimeError(f"{len(committed) - len(lags)} commits not observed in time")
    return lags


def parse_cases(text: str) -> tuple[tuple[int, int], ...]:
    """``"100,1000x50"`` -> ``((100, 0), (1000, 50))``."""
    cases = []
    for part in text.split(","):
        n, _, big = part.strip().partition("x")
        cases.append((int(n), int(big or 0)))
    return tuple(cases)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def controller_source(rev: str | None) -> tuple[Path, str]:
    """Where the controller imports ``txntable`` from, and which code that is: the working
    tree (``rev`` None; ``+changes`` when ``operator/`` has uncommitted edits) or commit
    ``rev`` exported with ``git archive`` (the shared checkout may hold others' unfinished
    edits; a recorded figure should belong to a commit)."""
    if rev is None:
        head = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--", "operator")
        return REPO / "operator", head + ("+changes" if dirty else "")
    commit = _git("rev-parse", "--short=12", rev)
    target = LOGS / f"src-{commit}"
    if not (target / "operator" / "txntable").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "operator"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "operator", commit


def run(
    quick: bool,
    cases: tuple[tuple[int, int], ...] | None = None,
    interval: float | None = None,
    rev: str | None = None,
) -> dict[str, Any]:
    chosen = cases or (QUICK_CASES if quick else FULL_CASES)
    every = interval or (QUICK_INTERVAL if quick else FULL_INTERVAL)
    started = time.time()
    LOGS.mkdir(parents=True, exist_ok=True)
    source, code = controller_source(rev)
    # under bench/out, on the generated big table's file system, so hard links work
    directory = Path(tempfile.mkdtemp(prefix="tables-", dir=LOGS))
    try:
        rows = [measure(n, every, directory, big=big, source=source) for n, big in chosen]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "rows": rows,
        "code": code,
        "window_intervals": WINDOW_INTERVALS,
        "machine": _machine(),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.time() - started,
    }


def _case(r: dict[str, Any]) -> str:
    if not r["big_tables"]:
        return str(r["tables"])
    return f"{r['tables']} ({r['big_tables']} of {r['big_files']:,} files)"


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    m = result["machine"]
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores, shared with other jobs (load average below); "
        f"Python {m['python']}, pyarrow {m['pyarrow']}; controller at {result['code']}; "
        f"measured {result['measured']}; "
        f"{result['wall_s'] / 60:.0f} min in all. Steady window: {result['window_intervals']} "
        "observe intervals, from the first interval after every table was observed in which no "
        "TxnTable had its metadata patched (Kopf's one-off writes of each object: settled after, "
        "counted from the first observation of all; the requests before the window, startup "
        "included, per table in the next column). RSS and CPU: the whole controller process, "
        "from /proc.",
        "",
        "| tables | interval | all observed after (CPU) | settled after | "
        "requests before / table | API requests / table-minute | CPU-s / table-minute | "
        "cores | RSS (peak) | lag p50 / p95 | load avg (max) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {_case(r)} | {r['interval_s']:.0f} s | {r['warmup_s']:.0f} s "
            f"({r['warmup_cpu_s']:.0f} CPU-s) | {r['settle_s']:.0f} s | "
            f"{r['requests_before'] / r['tables']:.1f} | "
            f"{r['requests_per_table_minute']:.4f} | "
            f"{r['cpu_s_per_table_minute']:.4f} | {r['cpu_cores']:.2f} | "
            f"{r['rss_mb']:.0f} MB ({r['peak_rss_mb']:.0f} MB) | "
            f"{r['lag_p50_s']:.1f} / {r['lag_p95_s']:.1f} s | "
            f"{r['load_mean']:.1f} ({r['load_max']:.1f}) |"
        )
    lines += [
        "",
        "Requests in the steady window by verb and resource (per table-minute, count):",
        "",
        "| tables | request | per table-minute | count |",
        "|---|---|---:|---:|",
    ]
    for r in rows:
        table_minutes = r["tables"] * r["window_s"] / 60
        if not r["requests"]:
            lines.append(f"| {_case(r)} | (none) | 0 | 0 |")
        for what, count in r["requests"].items():
            lines.append(f"| {_case(r)} | `{what}` | {count / table_minutes:.4f} | {count} |")
    lines.append("")
    for r in rows:
        modes = ", ".join(f"{count} {mode}" for mode, count in r.get("observation", {}).items())
        lines.append(
            f"- Observation of the {_case(r)} tables at the end (`status.observation`): {modes}."
        )
    bigs = [r for r in rows if r["lag_big_s"]]
    for r in bigs:
        lags = ", ".join(f"{x:.1f}" for x in r["lag_big_s"])
        lines.append(
            f"- Observation lag of the big tables among the {len(r['lag_s'])} committed to "
            f"with {_case(r)}: {lags} s."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"cases {QUICK_CASES}")
    parser.add_argument("--cases", type=parse_cases, help="e.g. 100,300,1000x50")
    parser.add_argument("--interval", type=float, help="observe interval, seconds")
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    parser.add_argument("--at", metavar="REV", help="run the controller of this commit")
    args = parser.parse_args(argv)
    # a terminated benchmark unwinds, so its controller and emulator processes stop too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(args.quick, args.cases, args.interval, args.at)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
