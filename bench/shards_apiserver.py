"""Three replicas, thousands of tables, one SIGKILLed: the shards' failover on the real API
server (issue 30.3).

The setting is ``bench.scale_apiserver``'s (the chart installed by Helm's SDK on the control
plane's kube-apiserver + etcd, ``POLICIES`` policies, 1% of the tables fragmented with runs in
flight on the Job backend, which no Job controller finishes), with the chart's sharded values:
``replicaCount: 3``, ``config.shards: SHARDS``. Three controller processes start at once, each
a pod of its own (its name in its Leases and its User-Agent).

1. start-up: until every table has been observed by some replica (the union of their
   ``txntable_table_observed_timestamp_seconds``), and the shards are split three ways;
2. steady: ``STEADY_INTERVALS`` intervals; requests per table-minute of all replicas, from the
   audit log;
3. the kill: SIGKILL of the replica holding the most shards; timed until its shards' Leases
   are held by the survivors and until each of its tables is observed again by a survivor
   (the first observed timestamp after the kill), then ``AFTER_INTERVALS`` more intervals;
4. from the audit log of the whole run: each table's status writes and run creations by
   replica (their User-Agent), the tables where two replicas' windows overlap
   (``tests.controlplane.shard_audit``), the runs created twice; observation gaps over the
   whole run as in ``bench.scale_apiserver`` (an upper bound: scrapes see the latest value).

Nothing is asserted here: the figures go to docs/benchmarks.md next to the goal (every table
observed again within 60 s + interval of the kill, no table maintained by two replicas, no run
launched twice).

``python -m bench.shards_apiserver [--tables 3000] [--interval 30] [--json F]``.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.read_snapshot import _machine
from bench.scale import LoadSampler, _link_table, _proc_stat, _template
from bench.scale_apiserver import (
    NAMESPACE,
    POLICIES,
    SCRAPE_EVERY,
    SYSTEM,
    Ages,
    _create_all,
    _fragmented_names,
    _fragmented_template,
    _names,
    _objects,
)

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "bench" / "out" / "shards-apiserver"
REPLICAS = 3
SHARDS = 12
STEADY_INTERVALS = 2
AFTER_INTERVALS = 2
DEFAULT_TABLES = 3000
DEFAULT_INTERVAL = 30.0
MAX_CONCURRENT_RUNS = 6
SHARD_PREFIX = "txntable-shard-"


def _holders(api: Any) -> dict[int, str]:
    from kubernetes import client

    found = client.CoordinationV1Api(api).list_namespaced_lease(SYSTEM)
    return {
        int(lease.metadata.name[len(SHARD_PREFIX) :]): lease.spec.holder_identity or ""
        for lease in found.items
        if lease.metadata.name.startswith(SHARD_PREFIX)
    }


def _scrape_all(replicas: list[Any], ages: Ages) -> None:
    for proc in replicas:
        if proc.proc.poll() is None:
            ages.scrape(proc)


def _scrape_for(replicas: list[Any], ages: Ages, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _scrape_all(replicas, ages)
        time.sleep(min(SCRAPE_EVERY, max(0.0, end - time.monotonic())))


def _settle(audit_log: Path, user: str, replicas: list[Any], ages: Ages, interval: float) -> float:
    """Scrape on until an interval passes without a metadata patch of our kinds (each
    replica's Kopf adds its finalizer to every object once: one wins, the others' JSON patches
    fail their resourceVersion test with 422); seconds waited, at most ten intervals."""
    from tests.controlplane import shard_audit

    kinds = {"txntables", "compactionpolicies", "checkpointpolicies"}

    def patches() -> int:
        return sum(
            1
            for e in shard_audit.events(audit_log, user)
            if e.get("verb") == "patch"
            and (e.get("objectRef") or {}).get("resource") in kinds
            and not (e.get("objectRef") or {}).get("subresource")
        )

    started = time.monotonic()
    for _ in range(10):
        before = patches()
        _scrape_for(replicas, ages, interval)
        if patches() == before:
            break
    return time.monotonic() - started


def measure(n: int, interval: float, directory: Path) -> dict[str, Any]:
    from tests.controlplane import binaries, shard_audit
    from tests.controlplane.controller import ControllerProcess, install_chart
    from tests.controlplane.plane import ControlPlane

    from txntable.handlers.shards import shard_of

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
    logdir = LOGS / f"n{n}"
    shutil.rmtree(logdir, ignore_errors=True)
    plane = ControlPlane.start(binaries.CONTROLPLANE.find(), directory / f"plane-{n}", logdir)
    replicas: list[ControllerProcess] = []
    try:
        install = install_chart(
            plane,
            directory,
            release="txntable",
            namespace=SYSTEM,
            values={
                "replicaCount": REPLICAS,
                "watch": {"namespaces": [NAMESPACE]},
                "config": {
                    "shards": SHARDS,
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
            started = time.monotonic()
            started_wall = time.time()
            replicas = [
                ControllerProcess.start(
                    plane, install, directory / f"r{i}-{n}", name=f"r{i}", wait=False
                )
                for i in range(REPLICAS)
            ]
            for proc in replicas:
                proc.wait_ready()
            deadline = started + 600 + n * 0.5
            while len(ages.last) < n:
                if time.monotonic() > deadline or any(p.proc.poll() is not None for p in replicas):
                    raise RuntimeError(f"{len(ages.last)} of {n} tables observed")
                _scrape_all(replicas, ages)
                time.sleep(2.0)
            startup = time.monotonic() - started
            pods = {p.env["POD_ID"]: p for p in replicas}
            while len(set(_holders(api).values()) & set(pods)) < REPLICAS:
                time.sleep(1.0)
            split = collections.Counter(_holders(api).values())
            settle = _settle(plane.audit_log, install.user, replicas, ages, interval)
            steady_start = dt.datetime.now(dt.UTC)
            _scrape_for(replicas, ages, interval * STEADY_INTERVALS)
            steady_end = dt.datetime.now(dt.UTC)
            rss = {p.env["POD_ID"]: _proc_stat(p.proc.pid)[1:] for p in replicas}

            victim_pod = split.most_common(1)[0][0]
            victim = pods[victim_pod]
            lost = {s for s, h in _holders(api).items() if h == victim_pod}
            orphans = {x for x in names if shard_of(NAMESPACE, x, SHARDS) in lost}
            before_kill = dict(ages.last)
            killed = time.time()
            victim.kill()
            survivors = [p for p in replicas if p is not victim]
            leases_at = None
            again: dict[str, float] = {}
            while len(again) < len(orphans) and time.time() - killed < 300:
                _scrape_all(survivors, ages)
                for name in orphans - set(again):
                    if ages.last.get(name, 0.0) > killed:
                        again[name] = ages.last[name] - killed
                if leases_at is None and not (set(_holders(api).values()) & {victim_pod}):
                    leases_at = time.time() - killed
                time.sleep(1.0)
            _scrape_for(survivors, ages, interval * AFTER_INTERVALS)
            end = time.time()
            rss_after = {p.env["POD_ID"]: _proc_stat(p.proc.pid)[1:] for p in survivors}
            worst, worst_table = ages.worst(end)
        for proc in survivors:
            proc.stop()
        run_tables = _run_tables(api)
        audit = list(shard_audit.events(plane.audit_log, install.user))
        by_table = shard_audit.writes(audit, NAMESPACE, run_tables)
        overlaps = shard_audit.overlaps(by_table)
        twice = shard_audit.launched_twice(by_table)
        steady = [
            e
            for e in audit
            if e.get("stage") == "ResponseComplete"
            and steady_start
            <= dt.datetime.fromisoformat(str(e["requestReceivedTimestamp"]))
            < steady_end
        ]
        minutes = n * (steady_end - steady_start).total_seconds() / 60
        after = sorted(again.values())
        return {
            "tables": n,
            "replicas": REPLICAS,
            "shards": SHARDS,
            "fragmented": len(fragmented),
            "policies": POLICIES,
            "interval_s": interval,
            "create_s": create_s,
            "startup_s": startup,
            "settle_s": settle,
            "finalizer_patches_refused": sum(
                1
                for e in audit
                if e.get("verb") == "patch"
                and (e.get("responseStatus") or {}).get("code") == 422
                and not (e.get("objectRef") or {}).get("subresource")
            ),
            "split": dict(split),
            "steady_requests_per_table_minute": len(steady) / minutes,
            "steady_by_verb": dict(
                collections.Counter(
                    f"{e['verb']} {(e.get('objectRef') or {}).get('resource', '?')}" for e in steady
                ).most_common(8)
            ),
            "rss_mb": {pod: {"rss": r, "peak": p} for pod, (r, p) in rss.items()},
            "rss_after_mb": {pod: {"rss": r, "peak": p} for pod, (r, p) in rss_after.items()},
            "victim": victim_pod,
            "victim_shards": len(lost),
            "orphans": len(orphans),
            "orphans_observed_again": len(again),
            "leases_taken_s": leases_at,
            "observed_again_max_s": after[-1] if after else None,
            "observed_again_p50_s": after[len(after) // 2] if after else None,
            "observed_again_min_s": after[0] if after else None,
            "victim_last_observation_age_s": max(
                (killed - before_kill.get(x, killed) for x in orphans), default=0.0
            ),
            "max_observation_gap_s": worst,
            "max_gap_table": worst_table,
            "max_gap_ended_after_start_s": ages.gap_end.get(worst_table, end) - started_wall,
            "max_gap_ended_after_kill_s": ages.gap_end.get(worst_table, end) - killed,
            "max_gap_table_orphan": worst_table in orphans,
            "startup_end_after_start_s": startup,
            "p95_observation_gap_s": ages.p95(),
            "tables_written": len(by_table),
            "writes": sum(len(w) for w in by_table.values()),
            "writers": dict(collections.Counter(w.replica for ws in by_table.values() for w in ws)),
            "overlapping_tables": len(overlaps),
            "overlaps_sample": dict(list(overlaps.items())[:5]),
            "runs_created": sum(
                1 for ws in by_table.values() for w in ws if w.what.startswith("create ")
            ),
            "runs_launched_twice": len(twice),
            "twice_sample": dict(list(twice.items())[:5]),
            "throttled_429": sum(
                1 for e in audit if (e.get("responseStatus") or {}).get("code") == 429
            ),
            "scrape_timeouts": ages.timeouts,
            "load_mean": sum(load.samples) / len(load.samples),
            "load_max": max(load.samples),
        }
    finally:
        for proc in replicas:
            proc.stop()
        plane.stop()
        shutil.rmtree(root, ignore_errors=True)


def _run_tables(api: Any) -> dict[str, str]:
    from kubernetes import client

    jobs = client.BatchV1Api(api).list_namespaced_job(NAMESPACE)
    return {
        j.metadata.name: (j.metadata.labels or {}).get("txntable.io/table", "?") for j in jobs.items
    }


def render(r: dict[str, Any], code: str, measured: str) -> str:
    m = _machine()
    peaks = ", ".join(f"{v['peak']:.0f} MB" for v in r["rss_mb"].values())
    return "\n".join(
        [
            f"Machine: {m['cpu']}, {m['cores']} cores; controller at {code}; measured {measured}.",
            f"{r['replicas']} replicas, {r['shards']} shards, {r['tables']} tables "
            f"({r['fragmented']} with runs in flight), {r['policies']} policies, a "
            f"{r['interval_s']:.0f} s interval; load average {r['load_mean']:.1f} "
            f"(max {r['load_max']:.1f}).",
            "",
            "| figure | value |",
            "|---|---:|",
            f"| start-up: every table observed by some replica | {r['startup_s']:.0f} s |",
            f"| settle: until no replica patches an object's metadata | {r['settle_s']:.0f} s "
            f"({r['finalizer_patches_refused']} finalizer patches refused: 422) |",
            f"| shards per replica | {', '.join(map(str, sorted(r['split'].values())))} |",
            f"| requests per table-minute, all replicas, steady | "
            f"{r['steady_requests_per_table_minute']:.4f} |",
            f"| peak RSS per replica | {peaks} |",
            f"| killed: shards, tables | {r['victim_shards']}, {r['orphans']} |",
            f"| its Leases held by survivors after | {r['leases_taken_s'] or float('nan'):.1f} s |",
            f"| its tables observed again after (min / median / max) | "
            f"{r['observed_again_min_s']:.1f} / {r['observed_again_p50_s']:.1f} / "
            f"{r['observed_again_max_s']:.1f} s |",
            f"| max observation gap over the run (p95) | {r['max_observation_gap_s']:.1f} s "
            f"({r['p95_observation_gap_s']:.1f} s) |",
            f"| tables two replicas wrote in overlapping windows | {r['overlapping_tables']} "
            f"(of {r['tables_written']} written, {r['writes']} writes) |",
            f"| runs created; created twice | {r['runs_created']}; {r['runs_launched_twice']} |",
            f"| 429s | {r['throttled_429']} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    from bench.scale import controller_source

    parser = argparse.ArgumentParser(prog="python -m bench.shards_apiserver", description=__doc__)
    parser.add_argument("--tables", type=int, default=DEFAULT_TABLES)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL)
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    LOGS.mkdir(parents=True, exist_ok=True)
    _, code = controller_source(None)
    directory = Path(tempfile.mkdtemp(prefix="tables-", dir=LOGS))
    try:
        result = measure(args.tables, args.interval, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    measured = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps(result, default=str), flush=True)
    print(render(result, code, measured))
    if args.json:
        args.json.write_text(json.dumps({"result": result, "code": code, "measured": measured},
                                        indent=2, default=str) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
