"""VACUUM benchmark: a 100,000-file table, ours against deltalake, side by side in one run.

The table (100 partitions x 1,000 files; ``quick``: 10 x 200) has one commit adding every file and
one removing half of them 30 days ago, a checkpoint, and every file and log entry aged 30 days, so
VACUUM with the default 7-day retention deletes exactly the removed half. Data files are 64 bytes
(VACUUM lists and deletes, it never reads data). Each contender runs in a child process on its own
copy (hard links: copies are instant and deleting a link leaves the original):

* ``ours``: ``Table.open(...).snapshot()`` then ``vacuum(...)``;
* ``deltalake``: ``DeltaTable(...).vacuum(dry_run=False, full=True)``: like ours it lists the
  whole table (its default "lite" mode deletes only files named by tombstones still in the
  checkpoint, and tombstones older than the retention have expired from it, so it would find
  nothing to delete here);
* ``ours_spark`` (full runs only: a JVM start per repetition): ``vacuum(..., sweeper=
  SparkSweeper(master="local[2]"))``, one listing task per group of partition directories and
  the deletes in chunks on the executors. The session is started (and its Python workers warmed)
  before the clock starts; its start-up is reported apart (``jvm_s``).

* ``ours_cli``: ``txntable vacuum PATH --json``, the command as a user runs it (its entry point
  chooses the Arrow allocator, ``txntable.arrow_pool``; ``bench.process``).

Reported: the child's whole-process wall time (interpreter start, imports, open, vacuum), the
in-process time of open + vacuum, and the child's peak RSS (``VmHWM``). Afterwards both copies must
hold exactly the same files.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "vacuum"
OUT_DIR = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parents[1]
_DAY = 86_400
_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def generate(root: Path, partitions: int, per_partition: int) -> Path:
    """The aged table described in the module docstring (cached by size)."""
    path = root / f"vacuum-{partitions}x{per_partition}"
    if (path / "_delta_log" / "_last_checkpoint").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    log = path / "_delta_log"
    log.mkdir(parents=True)
    now_ms = int(time.time() * 1000)
    old_ms = now_ms - 30 * _DAY * 1000
    adds, removes = [], []
    for p in range(partitions):
        directory = path / f"p={p}"
        directory.mkdir()
        for i in range(per_partition):
            name = f"p={p}/part-{i:05d}.parquet"
            (path / name).write_bytes(b"x" * 64)
            add = {"path": name, "partitionValues": {"p": str(p)}, "size": 64,
                   "modificationTime": old_ms, "dataChange": True}  # fmt: skip
            adds.append(json.dumps({"add": add}))
            if i % 2:
                remove = {"path": name, "deletionTimestamp": old_ms, "dataChange": True,
                          "partitionValues": {"p": str(p)}, "size": 64}  # fmt: skip
                removes.append(json.dumps({"remove": remove}))
    head = [
        json.dumps({"commitInfo": {"timestamp": old_ms, "operation": "WRITE"}}),
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": "vacuum-bench",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": _SCHEMA,
                    "partitionColumns": ["p"],
                    "configuration": {},
                    "createdTime": old_ms,
                }
            }
        ),
    ]
    (log / f"{0:020d}.json").write_text("\n".join(head + adds) + "\n")
    info = json.dumps({"commitInfo": {"timestamp": old_ms, "operation": "DELETE"}})
    (log / f"{1:020d}.json").write_text("\n".join([info, *removes]) + "\n")
    sys.path.insert(0, str(ROOT / "operator"))
    from txntable.engine.checkpoint.write import write_checkpoint
    from txntable.engine.table import Table

    write_checkpoint(Table.open(str(path)).snapshot())
    stamp = time.time() - 30 * _DAY
    for entry in path.rglob("*"):
        os.utime(entry, (stamp, stamp))
    return path


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, copy_function=os.link)
    return dest


_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
engine, path = sys.argv[1], sys.argv[2]
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
extra = {}
if engine == "ours":
    from txntable.engine.table import Table
    from txntable.engine.vacuum import vacuum
    t1 = time.perf_counter()
    result = vacuum(Table.open(path).snapshot())
    deleted = result.num_deleted
elif engine == "ours_spark":
    from txntable.engine.table import Table
    from txntable.engine.vacuum import vacuum
    from txntable.maintenance.executor_spark import SparkExecutor
    from txntable.maintenance.vacuum_spark import SparkSweeper
    executor = SparkExecutor(master="local[2]")
    executor.warm_up()
    executor.spark.sparkContext.setLogLevel("ERROR")
    t1 = time.perf_counter()
    extra["jvm_s"] = t1 - t0
    result = vacuum(Table.open(path).snapshot(), sweeper=SparkSweeper(spark=executor.spark))
    deleted = result.num_deleted
else:
    from deltalake import DeltaTable
    t1 = time.perf_counter()
    deleted = len(DeltaTable(path).vacuum(dry_run=False, full=True))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "vacuum_s": t2 - t1, "deleted": deleted,
                  "peak_mb": hwm(), **extra}), flush=True)
"""


def _child(engine: str, path: Path) -> dict[str, Any]:
    if engine == "ours_cli":
        from bench.process import run_cli

        done = run_cli(["vacuum", str(path), "--json"], {"ARROW_DEFAULT_MEMORY_POOL": None})
        doc = json.loads(done["stdout"])
        return {
            "process_s": done["process_s"],
            "peak_mb": done["peak_mb"],
            "vacuum_s": float(doc.get("seconds") or 0.0),
            "deleted": doc["numDeleted"],
        }
    env = dict(os.environ, PYTHONPATH=str(ROOT / "operator"))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, engine, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    wall = time.perf_counter() - started
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1]
    return {**json.loads(line), "process_s": wall}


def _files(path: Path) -> set[str]:
    return {
        str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts
    }


def run(quick: bool, spark: bool | None = None) -> dict[str, Any]:
    """``spark``: also run ``ours_spark`` (default: in full runs, not in quick ones)."""
    partitions, per = (10, 200) if quick else (100, 1000)
    engines = (
        ("ours", "ours_cli", "deltalake", "ours_spark")
        if (not quick if spark is None else spark)
        else ("ours", "ours_cli", "deltalake")
    )
    OUT_DIR.mkdir(exist_ok=True)
    started = time.time()
    pristine = generate(OUT_DIR, partitions, per)
    reps = 1 if quick else 3
    samples: dict[str, list[dict[str, Any]]] = {engine: [] for engine in engines}
    remaining: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as scratch:
        for rep in range(reps):
            for engine in engines:  # alternate: drift hits all alike
                copy = _copy(pristine, Path(scratch) / f"{engine}-{rep}")
                samples[engine].append(_child(engine, copy))
                remaining[engine] = _files(copy)
                shutil.rmtree(copy)
    same = all(remaining[engine] == remaining["deltalake"] for engine in engines)
    return {
        "files": partitions * per,
        "deleted_expected": partitions * per // 2,
        "samples": samples,
        "same_files_remain": same,
        "load": os.getloadavg(),
        "python": platform.python_version(),
        "wall_s": time.time() - started,
    }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def render(result: dict[str, Any]) -> str:
    import deltalake

    rows = []
    medians = {}
    engines = list(result["samples"])
    for engine in engines:
        s = result["samples"][engine]
        medians[engine] = {
            k: _median([x[k] for x in s]) for k in ("process_s", "vacuum_s", "peak_mb")
        }
        medians[engine]["deleted"] = s[-1]["deleted"]
    for engine in engines:
        m, d = medians[engine], medians["deltalake"]
        rows.append(
            f"| {engine} | {m['process_s']:.2f} s | {m['process_s'] / d['process_s']:.2f}x | "
            f"{m['vacuum_s']:.2f} s | {m['vacuum_s'] / d['vacuum_s']:.2f}x | "
            f"{m['peak_mb']:.0f} MB | {m['peak_mb'] / d['peak_mb']:.2f}x | {m['deleted']:,} |"
        )
    load = " ".join(f"{x:.1f}" for x in result["load"])
    reps = len(result["samples"]["ours"])
    notes = []
    if "ours_spark" in medians:
        jvm = _median([x["jvm_s"] for x in result["samples"]["ours_spark"]])
        notes = [
            "",
            "`ours_spark`: the Spark plan on `local[2]` (2 cores); its whole-process time includes "
            f"imports and the JVM and Python workers' start ({jvm:.1f} s), kept out of the "
            "in-process time; "
            "its peak RSS is the driver's Python process only (not the JVM or the workers).",
        ]
    return "\n".join(
        [
            f"A table of {result['files']:,} files ({result['deleted_expected']:,} of them removed "
            "30 days ago), default retention, each engine in a fresh child process on its own "
            f"hard-linked copy; median of {reps}. Machine: 2 CPUs, Python {result['python']}, "
            f"deltalake {deltalake.__version__}; measured "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}.",
            "",
            "| engine | whole process | ratio | open + vacuum (in process) | ratio | peak RSS "
            "| ratio | files deleted |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            "Ratios are ours / deltalake (< 1 means we are faster or smaller). All copies hold "
            f"the same files afterwards: {'yes' if result['same_files_remain'] else 'NO'}.",
            *notes,
        ]
    )
