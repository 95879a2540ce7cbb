"""The maintenance jobs on a Spark standalone cluster against the same jobs on ``local[2]``.

The cluster is the test suite's (``tests/integration/spark_cluster.py``): a master and two workers
with one core and 1 GiB each, on this machine, so both masters have the same two cores; the
difference is what a real cluster adds: a driver apart from its executors, executor JVMs started
per application, tasks and their results crossing processes. Every job is a fresh
``python -m txntable.jobs.<kind>`` process, as a SparkApplication's driver is, on its own copy of
one generated table (``PARTITIONS`` partitions, ``COMMITS`` appends of ``ROWS`` rows, written by
deltalake):

* ``optimize``: bin-pack of every partition;
* ``zorder``: Z-order by two columns, every bin distributed (``--distribute-zorder-above 1``);
* ``vacuum``: the VACUUM job with Spark tasks (``--vacuum-spark-min-files 1``) after an OPTIMIZE
  (the table keeps no retention, so the compacted-away files go);
* ``checkpoint``: the checkpoint job.

Reported per job and master: the process's wall time (JVM start, executors, work) and the time
the job itself reports (``seconds`` in its result line: from after the interpreter start). Also
the cluster's start (master and workers spawned until both workers are ALIVE). Not part of
``make bench`` (minutes, and a cluster): ``python -m bench.spark_cluster [--reps N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4
COMMITS = 30
ROWS = 2_000
NO_RETENTION = {"delta.deletedFileRetentionDuration": "interval 0 hours"}

JOBS: dict[str, tuple[str, tuple[str, ...]]] = {
    "optimize": ("optimize", ()),
    "zorder": ("optimize", ("--zorder-by", "i32,id", "--distribute-zorder-above", "1")),
    "vacuum": ("vacuum", ("--vacuum-spark-min-files", "1")),
    "checkpoint": ("checkpoint", ()),
}


def make_table(path: Path) -> None:
    from deltalake import write_deltalake
    from tests.integration.optimize_helpers import batch

    for i in range(COMMITS):
        write_deltalake(
            str(path),
            batch(i * ROWS, ROWS, partitions=PARTITIONS),
            mode="append",
            partition_by=["p"],
            configuration=NO_RETENTION if i == 0 else None,
        )


def run_job(kind: str, path: Path, master: str, env: dict[str, str]) -> dict[str, Any]:
    module, args = JOBS[kind]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", f"txntable.jobs.{module}", str(path), "--master", master, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=1200,
        check=False,
    )
    wall = time.monotonic() - started
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode != 0:
        raise SystemExit(f"{kind} on {master} failed: {doc.get('error')}\n{done.stderr[-2000:]}")
    return {"wall_s": wall, "job_s": float(doc.get("seconds") or 0)}


def prepare(kind: str, base: Path, work: Path, env: dict[str, str]) -> Path:
    """A fresh copy of the table; VACUUM gets one that an in-process OPTIMIZE compacted."""
    path = work / f"{kind}-{time.monotonic_ns()}"
    shutil.copytree(base, path)
    if kind == "vacuum":
        subprocess.run(
            [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow"],
            capture_output=True,
            env=env,
            cwd=REPO,
            check=True,
        )
    return path


def run(reps: int) -> dict[str, Any]:
    from tests.integration import spark_cluster

    with tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as tmp:
        work = Path(tmp)
        base = work / "base"
        make_table(base)
        with spark_cluster.running(work / "cluster", workers=2) as cluster:
            env = cluster.job_env()
            masters = {"cluster": cluster.master_url, "local[2]": "local[2]"}
            rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for _ in range(reps):
                for kind in JOBS:
                    for label, master in masters.items():
                        path = prepare(kind, base, work, env)
                        measured = run_job(kind, path, master, env)
                        rows.setdefault(kind, {}).setdefault(label, []).append(measured)
                        print(kind, label, measured, flush=True)
            start_s = cluster.start_seconds
    return {
        "start_s": start_s,
        "rows": rows,
        "reps": reps,
        "load": os.getloadavg(),
        "table": {"partitions": PARTITIONS, "commits": COMMITS, "rows": ROWS},
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Cluster start (master + 2 workers ALIVE): {result['start_s']:.1f} s. "
        f"Median of {result['reps']}; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in result['load'])}.",
        "",
        "| job | cluster wall (s) | cluster job (s) | local[2] wall (s) | local[2] job (s) "
        "| wall ratio |",
        "|---|---|---|---|---|---|",
    ]
    for kind, by_master in result["rows"].items():

        def med(label: str, key: str, runs: dict[str, list[dict[str, Any]]] = by_master) -> float:
            return statistics.median(r[key] for r in runs[label])

        cluster, local = med("cluster", "wall_s"), med("local[2]", "wall_s")
        lines.append(
            f"| {kind} | {cluster:.1f} | {med('cluster', 'job_s'):.1f} | {local:.1f} "
            f"| {med('local[2]', 'job_s'):.1f} | {cluster / local:.2f}x |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_cluster", description=__doc__)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    print(render(run(args.reps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
