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

Reported per job and master: the process's wall time (JVM start, executors, work) and its work:
the wall time less the median wall time of a ``startup`` process on the same master, which only
starts a session, runs one trivial task per slot (on the cluster that waits for both executors
and starts a Python worker in each, as a job's first stage does) and stops. Also the cluster's
start (master and workers spawned until both workers are ALIVE). In ``make bench``
(``bench.run``, NAME ``spark_cluster``: about ten minutes); alone:
``python -m bench.spark_cluster [--reps N] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.process import PeakRss

NAME = "spark_cluster"
REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4
COMMITS = 30
ROWS = 2_000
QUICK_COMMITS = 6
NO_RETENTION = {"delta.deletedFileRetentionDuration": "interval 0 hours"}

JOBS: dict[str, tuple[str, tuple[str, ...]]] = {
    "optimize": ("optimize", ()),
    "zorder": ("optimize", ("--zorder-by", "i32,id", "--distribute-zorder-above", "1")),
    "vacuum": ("vacuum", ("--vacuum-spark-min-files", "1")),
    "checkpoint": ("checkpoint", ()),
}


#: what every job pays before its work (module docstring): run as ``python -c`` with the master
STARTUP = """
import sys
from txntable.maintenance.spark_session import start_session
spark = start_session(sys.argv[1], "txntable-bench-startup", {})
slots = spark.sparkContext.defaultParallelism
spark.sparkContext.parallelize(range(slots), slots).map(lambda x: x).collect()
spark.stop()
"""


def make_table(path: Path, commits: int = COMMITS) -> None:
    from deltalake import write_deltalake
    from tests.integration.optimize_helpers import batch

    for i in range(commits):
        write_deltalake(
            str(path),
            batch(i * ROWS, ROWS, partitions=PARTITIONS),
            mode="append",
            partition_by=["p"],
            configuration=NO_RETENTION if i == 0 else None,
        )


def run_job(kind: str, path: Path, master: str, env: dict[str, str]) -> dict[str, Any]:
    if kind == "startup":
        command = [sys.executable, "-c", STARTUP, master]
    else:
        module, args = JOBS[kind]
        command = [sys.executable, "-m", f"txntable.jobs.{module}", str(path), "--master", master]
        command += args
    started = time.monotonic()
    # the job's tree: its driver and, on local[2], the executor threads and Python workers (a
    # cluster's executors are the workers' children, not the job's)
    with (
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
        ) as proc,
        PeakRss(proc.pid) as memory,
    ):
        try:
            stdout, stderr = proc.communicate(timeout=1200)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{kind} on {master} failed: {stdout[-500:]}\n{stderr[-2000:]}")
    return {"wall_s": wall, "peak_rss_mb": memory.figures()["peak_rss_mb"]}


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


def run(quick: bool = False, reps: int = 1) -> dict[str, Any]:
    from tests.integration import spark_cluster

    commits = QUICK_COMMITS if quick else COMMITS
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as tmp:
        work = Path(tmp)
        base = work / "base"
        make_table(base, commits)
        with spark_cluster.running(work / "cluster", workers=2) as cluster:
            env = cluster.job_env()
            masters = {"cluster": cluster.master_url, "local[2]": "local[2]"}
            rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for _ in range(reps):
                for kind in ("startup", *JOBS):
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
        "load_start": load_start,
        "load": os.getloadavg(),
        "table": {"partitions": PARTITIONS, "commits": commits, "rows": ROWS},
    }


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]

    def walls(kind: str, label: str) -> list[float]:
        return [r["wall_s"] for r in rows[kind][label]]

    def med(kind: str, label: str) -> float:
        return statistics.median(walls(kind, label))

    def spread(kind: str, label: str) -> str:
        got = walls(kind, label)
        text = f"{statistics.median(got):.1f}"
        return text if len(got) < 2 else f"{text} ({min(got):.1f}-{max(got):.1f})"

    def peak(kind: str, label: str) -> str:
        got = [r["peak_rss_mb"] for r in rows[kind][label] if "peak_rss_mb" in r]
        return f"{statistics.median(got):.0f} MB" if got else "not measured"

    def load(key: str) -> str:
        return ", ".join(f"{x:.1f}" for x in result[key]) if key in result else "not recorded"

    table = result["table"]
    lines = [
        f"Table: {table['partitions']} partitions, {table['commits']} appends of "
        f"{table['rows']:,} rows (deltalake). Cluster start (master + 2 workers ALIVE): "
        f"{result['start_s']:.1f} s. Median of {result['reps']} (min-max in brackets); "
        f"load average (1, 5, 15 min) at the start {load('load_start')}, "
        f"at the end {load('load')}.",
        "",
        f"Startup (session, one task per slot, stop): cluster {spread('startup', 'cluster')} s, "
        f"local[2] {spread('startup', 'local[2]')} s. Work = median wall less median startup.",
        "",
        "| job | cluster wall (s) | local[2] wall (s) | wall ratio | cluster work (s) "
        "| local[2] work (s) | work ratio | peak RSS of the job's tree, cluster / local[2] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in JOBS:
        wall = {label: med(kind, label) for label in ("cluster", "local[2]")}
        work = {label: wall[label] - med("startup", label) for label in wall}
        # a job whose work is within its startup's noise has no ratio, not a negative one
        positive = work["cluster"] > 0 and work["local[2]"] > 0
        ratio = f"{work['cluster'] / work['local[2]']:.2f}x" if positive else "n/a"
        lines.append(
            f"| {kind} | {spread(kind, 'cluster')} | {spread(kind, 'local[2]')} "
            f"| {wall['cluster'] / wall['local[2]']:.2f}x | {work['cluster']:.1f} "
            f"| {work['local[2]']:.1f} | {ratio} "
            f"| {peak(kind, 'cluster')} / {peak(kind, 'local[2]')} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_cluster", description=__doc__)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_COMMITS} appends")
    args = parser.parse_args()
    print(render(run(args.quick, args.reps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
