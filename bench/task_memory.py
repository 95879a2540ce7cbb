"""Peak memory of one compaction task per input byte: the figure the controller sizes runs by.

A Spark task of a compaction run is ``rewrite_bin`` on one bin in a Python worker (it reads every
input into Arrow, concatenates, writes the outputs), so the memory a run needs per task slot is
that function's peak plus the worker's own footprint. This bench measures both on real bins: for
each bin size a generated table (one partition, appends of ``bench.zorder_spark.ROWS_PER_FILE``
random rows, about 2 MB of Parquet each) is compacted as one bin by the Arrow executor with one
worker thread (the same ``rewrite_bin``), in a fresh interpreter with the images' allocator
setting (``ARROW_DEFAULT_MEMORY_POOL=system``). Reported: the process's ``VmHWM`` after imports and
planning (the worker's footprint), and after the rewrite; the difference over the bin's input
bytes is the bytes of peak memory per input byte. ``launch.sizing.BYTES_PER_INPUT_BYTE`` and
``launch.sizing.WORKER_BASE_BYTES`` are the largest ratio and footprint measured, rounded up.

Beside each, the reference (issue 31.3): pyarrow alone doing the same work in its own fresh
interpreter, reading the bin's files with ``pq.read_table``, concatenating them and writing one
file with the same Parquet settings (``ParquetWriteOptions()``: zstd 1, dictionary by sampled
cardinality), no log, no commit. Goal: ours at most 1.0x its peak above the footprint.

``python -m bench.task_memory [--files N ...]``; in ``make bench`` as ``task_memory``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

NAME = "task_memory"
OUT_DIR = Path(__file__).resolve().parent / "out"
FILES = (8, 32, 64, 128)
QUICK_FILES = (4, 8)
GIB = 1024**3


def _vm_hwm_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _pyarrow_child(path: str) -> dict[str, Any]:
    """The reference: the bin's files read, concatenated and written by pyarrow alone."""
    import time
    from urllib.parse import unquote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.engine.write.parquet_options import ParquetWriteOptions
    from txntable.maintenance.optimize import plan

    policy = OptimizeOptions(target_file_size=GIB, min_file_size=GIB)
    (only,) = plan(Table.open(path), policy).bins
    inputs = [os.path.join(path, unquote(p)) for p in only.paths]
    before = _vm_hwm_kb()
    started = time.perf_counter()
    data = pa.concat_tables([pq.read_table(f) for f in inputs])
    ParquetWriteOptions().write(data, os.path.join(path, "pyarrow-alone.parquet"))
    seconds = time.perf_counter() - started
    after = _vm_hwm_kb()
    return {
        "seconds": round(seconds, 3),
        "peak_above_mb": round((after - before) / 1024),
        "per_input_byte": round((after - before) * 1024 / only.total_bytes, 2),
    }


def _child(path: str) -> dict[str, Any]:
    import time

    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.optimize import optimize, plan

    policy = OptimizeOptions(target_file_size=GIB, min_file_size=GIB)
    planned = plan(Table.open(path), policy)
    (only,) = planned.bins
    before = _vm_hwm_kb()
    started = time.perf_counter()
    result = optimize(Table.open(path), policy, ArrowExecutor(workers=1))
    seconds = time.perf_counter() - started
    after = _vm_hwm_kb()
    return {
        "seconds": round(seconds, 3),
        "files": len(only.paths),
        "input_bytes": only.total_bytes,
        "hwm_before_mb": round(before / 1024),
        "hwm_after_mb": round(after / 1024),
        "peak_above_mb": round((after - before) / 1024),
        "per_input_byte": round((after - before) * 1024 / only.total_bytes, 2),
        "error": result.error,
    }


def measure(files: int) -> dict[str, Any]:
    """One bin of ``files`` generated files, compacted in a fresh interpreter."""
    from bench.zorder_spark import generate

    original = OUT_DIR / f"task-memory-{files}"
    if not original.exists():
        generate(original, files)
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    got = {}
    for mode in ("--child", "--pyarrow-child"):
        work = OUT_DIR / f"task-memory-{files}-run"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(original, work)
        try:
            out = subprocess.run(
                [sys.executable, "-m", "bench.task_memory", mode, str(work)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
                cwd=Path(__file__).resolve().parents[1],
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        got[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    row = dict(got["--child"])
    ref = got["--pyarrow-child"]
    row["pyarrow"] = ref
    row["peak_ratio"] = round(row["peak_above_mb"] / max(ref["peak_above_mb"], 1), 2)
    row["time_ratio"] = round(row["seconds"] / max(ref["seconds"], 1e-3), 2)
    return row


def run(quick: bool = False, files: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The bench protocol of ``bench.run``: one row per bin size, plus the machine."""
    OUT_DIR.mkdir(exist_ok=True)
    rows = [measure(n) for n in (files or (QUICK_FILES if quick else FILES))]
    return {
        "rows": rows,
        "max_per_input_byte": max(r["per_input_byte"] for r in rows),
        "max_footprint_mb": max(r["hwm_before_mb"] for r in rows),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Machine: {result['machine']}. One bin compacted by `rewrite_bin` in a fresh "
        "interpreter (`ARROW_DEFAULT_MEMORY_POOL=system`).",
        "",
        "| files in the bin | input MB | VmHWM before | VmHWM after | peak above"
        " | per input byte | pyarrow alone: peak above | ours / pyarrow, peak "
        "| seconds: ours / pyarrow alone |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        ref = r.get("pyarrow")  # absent in results recorded before the reference existed
        extra = (
            f" | {ref['peak_above_mb']} MB | **{r['peak_ratio']:.2f}x** "
            f"| {r['seconds']:.2f} / {ref['seconds']:.2f} s ({r['time_ratio']:.2f}x) |"
            if ref
            else " | | | |"
        )
        lines.append(
            f"| {r['files']} | {r['input_bytes'] / 2**20:.1f} | {r['hwm_before_mb']} MB "
            f"| {r['hwm_after_mb']} MB | {r['peak_above_mb']} MB | {r['per_input_byte']}" + extra
        )
    lines += [
        "",
        f"Largest ratio: {result['max_per_input_byte']} bytes of peak memory per input byte; "
        f"worker footprint before the task: {result['max_footprint_mb']} MB.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--pyarrow-child", help=argparse.SUPPRESS)
    parser.add_argument("--files", type=int, nargs="*", default=list(FILES))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return
    if args.pyarrow_child:
        print(json.dumps(_pyarrow_child(args.pyarrow_child)))
        return
    print(render(run(files=tuple(args.files))))


if __name__ == "__main__":
    main()
