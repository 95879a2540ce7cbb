"""Z-order of one big bin on Spark local[2]: one task holding the bin against the distributed path.

One generated table (one partition, ``FILES`` appends of random rows, about ``FILES * 2`` MB of
Parquet) is Z-ordered by two columns on its own copy by each path, each in a fresh process with
its own SparkSession, so worker processes start clean:

* ``one task``: ``SparkExecutor(distribute_zorder_above=None)``, the bin is one task
  (``rewrite_bin``);
* ``distributed``: ``SparkExecutor(distribute_zorder_above=0)``, ``maintenance/zorder_spark``.

Reported: wall time of ``optimize`` (the session is started and Python workers warmed first, so
JVM start is not in it), the largest peak RSS (``VmHWM``) of any Python worker process, read from
``/proc`` every second and at the end (every task runs in one of them, so this is the per-task
peak plus the worker's own ~100 MB), and the output files. Not part of ``make bench`` (it takes
minutes and several GB); run ``python -m bench.zorder_spark [--files N]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bench.process import descendants as _descendants
from bench.process import status_kb as _vm_hwm_kb

OUT_DIR = Path(__file__).resolve().parent / "out"
ROWS_PER_FILE = 100_000
TARGET = 32 * 1024 * 1024


def _random_rows(seed: int, start: int, n: int) -> pa.Table:
    rand = pc.random(n, initializer=seed)
    ints = pc.cast(pc.floor(pc.multiply(rand, 1e12)), pa.int64())
    rand2 = pc.random(n, initializer=seed + 1_000_000)
    days = pc.cast(pc.floor(pc.multiply(rand2, 3000)), pa.int32())
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "x": ints,
            "d": pc.cast(days, pa.date32()),
            "s": pc.cast(pc.cast(pc.floor(pc.multiply(rand2, 1e9)), pa.int64()), pa.string()),
            "v": pc.random(n, initializer=seed + 2_000_000),
        }
    )


def generate(path: Path, files: int) -> None:
    from txntable.engine.table import Table

    table = Table.create(str(path), _random_rows(0, 0, 1).schema)
    for i in range(files):
        table.append(_random_rows(i + 1, i * ROWS_PER_FILE, ROWS_PER_FILE))


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"python" in fh.read().split(b"\0")[0]
    except OSError:
        return False


def _child(path: str, mode: str) -> dict[str, Any]:
    import logging

    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.maintenance.executor_spark import SparkExecutor
    from txntable.maintenance.optimize import optimize

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    distribute = 0 if mode == "distributed" else None
    executor = SparkExecutor(master="local[2]", distribute_zorder_above=distribute)
    executor.warm_up()
    peaks: dict[int, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            for pid in _descendants(os.getpid()):
                if _is_python(pid):
                    peaks[pid] = max(peaks.get(pid, 0), _vm_hwm_kb(pid))
            done.wait(1.0)  # VmHWM is a high-water mark: a slow poll misses nothing but exits

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    t0 = time.perf_counter()
    result = optimize(
        Table.open(path), OptimizeOptions(z_order_by=("x", "d"), target_file_size=TARGET), executor
    )
    seconds = time.perf_counter() - t0
    done.set()
    poller.join()
    for pid in _descendants(os.getpid()):  # the workers are still alive (reused): final peaks
        if _is_python(pid):
            peaks[pid] = max(peaks.get(pid, 0), _vm_hwm_kb(pid))
    executor.close()
    return {
        "mode": mode,
        "seconds": round(seconds, 1),
        "worker_peak_mb": round(max(peaks.values(), default=0) / 1024),
        "error": result.error,
        "files_in": result.num_files_removed,
        "files_out": result.num_files_added,
        "bytes_in_mb": round(result.num_bytes_removed / 2**20),
        "bytes_out_mb": round(result.num_bytes_added / 2**20),
    }


def run(files: int) -> list[dict[str, Any]]:
    original = OUT_DIR / f"zorder-spark-{files}"
    if not (original / "_delta_log").exists():
        shutil.rmtree(original, ignore_errors=True)
        generate(original, files)
    out = []
    for mode in ("one task", "distributed"):
        copy = OUT_DIR / "zorder-spark-run"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(original, copy)
        done = subprocess.run(
            [sys.executable, "-m", "bench.zorder_spark", "--child", str(copy), mode],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        for line in done.stderr.splitlines():
            if "zorder_spark" in line:
                print(line, file=sys.stderr)
        if not lines:
            raise RuntimeError(done.stderr[-2000:])
        out.append(json.loads(lines[-1]))
        shutil.rmtree(copy, ignore_errors=True)
    return out


def render(results: list[dict[str, Any]]) -> str:
    rows = [
        "| path | time (s) | peak RSS of a Python worker (MB) | files in -> out | MB in -> out |",
        "|---|---:|---:|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['mode']} | {r['seconds']} | {r['worker_peak_mb']} | "
            f"{r['files_in']} -> {r['files_out']} | {r['bytes_in_mb']} -> {r['bytes_out_mb']} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--child", nargs=2, metavar=("PATH", "MODE"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)), flush=True)
        return
    results = run(args.files)
    print(render(results))
    print(json.dumps({"date": dt.date.today().isoformat(), "results": results}))


if __name__ == "__main__":
    main()
