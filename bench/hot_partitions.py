"""Conflict-aware OPTIMIZE benchmark: rewritten bytes wasted under a writer on hot partitions.

A table of 20 partitions of small files. A writer process (deltalake, as another team's job would
be) loops until told to stop: it DELETEs a slice of rows from each of 2 hot partitions in turn (a
DELETE rewrites every file it touches: removes + adds, the writes that invalidate an OPTIMIZE's
inputs), appends small files to the hot partitions and to 3 cold ones chosen at random (seeded),
and retries its own commits when it loses a race. Meanwhile this process runs OPTIMIZE (our engine,
Arrow executor) every ``PAUSE_S`` seconds, a number of rounds, one commit per run:

* ``naive``: plans every partition with work;
* ``avoid``: ``--avoid-partitions-written-within 10m`` (``avoid_recent_writes_ms``): partitions a
  commit removed files from in the last 10 minutes are deferred (read from the newest commits).

Each mode runs on its own fresh copy of the table with its own writer, one after the other. A bin
whose inputs the writer removed between planning and committing is dropped: the bytes it rewrote
are wasted (``numBytesDropped``). Reported per run and in total: bins planned / committed /
dropped, input bytes committed and dropped, commit attempts, partitions and bytes deferred; and
the writer's commits. The cost of avoiding is also visible: the hot partitions stay uncompacted
while they are hot (their bytes are in "deferred").

Usage: ``python -m bench.run --only hot_partitions [--quick]``; the writer is
``python -m bench.hot_partitions writer PATH STOP_FILE SEED``.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.process import PeakRss, peak_cell

NAME = "hot_partitions"
ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = Path(__file__).resolve().parent / "out"
PARTITIONS = [f"p{i:02d}" for i in range(20)]
HOT = ("p03", "p11")
WINDOW = "10m"
PAUSE_S = 1.0


def _rows(start: int, n: int, parts: list[str]) -> Any:
    import pyarrow as pa

    ids = list(range(start, start + n * len(parts)))
    return pa.table(
        {
            "id": ids,
            "p": [parts[i % len(parts)] for i in range(len(ids))],
            "v": [i * 0.5 for i in ids],
            "s": [f"row-{i:012d}-payload" for i in ids],
        }
    )


def build(path: Path, files_per_partition: int, rows_per_file: int) -> Path:
    """20 partitions of ``files_per_partition`` small files each (one append per file round)."""
    from deltalake import write_deltalake

    for k in range(files_per_partition):
        start = k * rows_per_file * len(PARTITIONS)
        write_deltalake(
            str(path), _rows(start, rows_per_file, PARTITIONS), mode="append", partition_by=["p"]
        )
    return path


def writer(path: str, stop_file: str, seed: int) -> None:
    """The hot-partition writer (child process): says ``ready`` once it has rewritten each hot
    partition, and prints one JSON line of counts at the end."""
    from deltalake import DeltaTable, write_deltalake

    rng = random.Random(seed)
    counts = {"deletes": 0, "appends": 0, "retries": 0}
    next_id = 10_000_000
    step = 0

    def attempt(fn: Any) -> None:
        for _ in range(50):
            try:
                fn()
                return
            except Exception as exc:
                if "concurrent" not in str(exc).lower() and "conflict" not in str(exc).lower():
                    raise
                counts["retries"] += 1
        raise RuntimeError("writer gave up after 50 conflicts")

    while not os.path.exists(stop_file):
        hot = HOT[step % len(HOT)]
        where = f"p = '{hot}' AND id % 17 = {step % 17}"
        attempt(lambda w=where: DeltaTable(path).delete(w))
        counts["deletes"] += 1
        for part in (hot, hot, *rng.sample([p for p in PARTITIONS if p not in HOT], 3)):
            rows = _rows(next_id, 200, [part])
            next_id += rows.num_rows
            attempt(lambda r=rows: write_deltalake(path, r, mode="append", partition_by=["p"]))
            counts["appends"] += 1
        step += 1
        if step == len(HOT):  # every hot partition has been rewritten once
            print(json.dumps({"ready": True}), flush=True)
        time.sleep(0.05)
    print(json.dumps(counts), flush=True)


def _optimize(path: Path, avoid: bool) -> dict[str, Any]:
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.optimize import optimize

    policy = OptimizeOptions(avoid_recent_writes_ms=600_000 if avoid else None)
    load = os.getloadavg()[0]
    result = optimize(Table.open(str(path)), policy, ArrowExecutor(workers=2))
    deferred = result.deferred_partitions or []
    return {
        "bins_planned": result.bins_planned,
        "bins_committed": result.bins_committed,
        "bins_dropped": result.bins_skipped,
        "bytes_committed": result.num_bytes_removed,
        "bytes_dropped": result.num_bytes_dropped,
        "attempts": result.attempts,
        "partitions_deferred": len(deferred),
        "bytes_deferred": sum(d["bytes"] for d in deferred),
        "seconds": round(result.seconds, 2),
        "load1": round(load, 2),
        "error": result.error,
    }


def run_mode(pristine: Path, scratch: Path, mode: str, rounds: int, seed: int) -> dict[str, Any]:
    path = scratch / mode
    shutil.copytree(pristine, path)  # copy2 keeps the commit files' times (no ICT here)
    stop = scratch / f"{mode}.stop"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.hot_partitions", "writer", str(path), str(stop), str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = []
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the writer has rewritten each hot partition once
        for _ in range(rounds):
            with PeakRss(os.getpid(), exclude=proc.pid) as memory:  # OPTIMIZE, not the writer
                run = _optimize(path, avoid=mode == "avoid")
            runs.append(run | memory.figures())
            if proc.poll() is not None:
                break
            time.sleep(PAUSE_S)
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the writer failed: {err[-2000:]}")
    return {"runs": runs, "writer": json.loads(out.strip().splitlines()[-1])}


def run(quick: bool) -> dict[str, Any]:
    import deltalake

    files, rows, rounds = (4, 500, 3) if quick else (10, 5000, 8)
    OUT_DIR.mkdir(exist_ok=True)
    started = time.time()
    load_before = os.getloadavg()
    modes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as scratch:
        pristine = build(Path(scratch) / "pristine", files, rows)
        for mode in ("naive", "avoid"):
            modes[mode] = run_mode(pristine, Path(scratch), mode, rounds, seed=16)
    return {
        "partitions": len(PARTITIONS),
        "hot": list(HOT),
        "files_per_partition": files,
        "rows_per_file": rows,
        "rounds": rounds,
        "window": WINDOW,
        "modes": modes,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "deltalake": deltalake.__version__,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": round(time.time() - started, 1),
    }


def totals(runs: list[dict[str, Any]]) -> dict[str, int]:
    keys = ("bins_planned", "bins_committed", "bins_dropped", "bytes_committed", "bytes_dropped")
    return {k: sum(r[k] for r in runs) for k in keys}


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['partitions']} partitions of {result['files_per_partition']} small files "
        f"({result['rows_per_file']:,} rows each); a deltalake writer DELETEs from the hot "
        f"partitions {', '.join(result['hot'])} in turn and appends small files to them and to "
        "3 random cold ones, continuously; OPTIMIZE (Arrow executor, one commit per run) runs "
        f"{result['rounds']} times, {PAUSE_S:.0f} s apart, naive and then avoiding partitions "
        f"with removes in the last {result['window']}, each mode on a fresh copy with its own "
        f"writer. Machine: {result['cpus']} CPUs shared with other work, Python "
        f"{result['python']}, deltalake {result['deltalake']}; measured {result['measured']}, "
        "load average before "
        + " ".join(f"{x:.1f}" for x in result["load_before"])
        + ", after "
        + " ".join(f"{x:.1f}" for x in result["load_after"])
        + ".",
        "",
        "| mode | runs | bins planned | committed | dropped | bytes rewritten and committed "
        "| bytes rewritten and dropped | wasted | writer commits (retries) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, data in result["modes"].items():
        t = totals(data["runs"])
        done = t["bytes_committed"] + t["bytes_dropped"]
        waste = t["bytes_dropped"] / done if done else 0.0
        w = data["writer"]
        lines.append(
            f"| {mode} | {len(data['runs'])} | {t['bins_planned']} | {t['bins_committed']} | "
            f"{t['bins_dropped']} | {_mb(t['bytes_committed'])} | {_mb(t['bytes_dropped'])} | "
            f"{waste:.0%} | {w['deletes'] + w['appends']} ({w['retries']}) |"
        )
    lines += [
        "",
        "Per run (bins planned/committed/dropped, MB committed/dropped, partitions deferred "
        "and their MB, commit attempts, seconds, 1-minute load, and the peak RSS of this "
        "process and its executor threads during the run, the writer left out):",
        "",
        "| mode | run | bins | MB committed | MB dropped | deferred | attempts | s | load "
        "| peak RSS, MB (before) |",
        "|---|---:|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for mode, data in result["modes"].items():
        for i, r in enumerate(data["runs"], 1):
            lines.append(
                f"| {mode} | {i} | {r['bins_planned']}/{r['bins_committed']}/{r['bins_dropped']}"
                f" | {r['bytes_committed'] / 1e6:.2f} | {r['bytes_dropped'] / 1e6:.2f} | "
                f"{r['partitions_deferred']} ({r['bytes_deferred'] / 1e6:.2f} MB) | "
                f"{r['attempts']} | {r['seconds']:.2f} | {r['load1']:.1f} | {peak_cell(r)} |"
            )
    lines += [
        "",
        "Dropped bins are bins whose inputs the writer's DELETE removed after OPTIMIZE planned "
        "them: their rewrite is thrown away (and the run retries its commit). Appends never "
        "cost a bin (OPTIMIZE commits `dataChange=false` under SnapshotIsolation). The price "
        "of avoiding is that the hot partitions are not compacted while they stay hot "
        '("deferred").',
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "writer":
        writer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: python -m bench.hot_partitions writer PATH STOP_FILE SEED")
