"""Side by side with delta-spark, Delta Lake's reference implementation (issue 21.6).

Every contender works on its own fresh copy of the same table (data files hard-linked from one
pristine original, page cache warmed once), one after the other on the same machine:

* OPTIMIZE (bin-pack and Z-order by ``id, value``) of a fragmented table as ``bench.optimize``
  generates it (``FULL``: 300 files of ~280 KB, 4 partitions): ours with the Arrow executor (two
  threads, in this process) and with the Spark executor (PySpark 4.3, ``local[2]``, session and
  Python workers started before the clock), against delta-spark 4.4 on PySpark 4.2 (``local[2]``,
  ``OPTIMIZE`` and ``OPTIMIZE ... ZORDER BY``, target file size set to ours, 128 MiB). Output
  files and bytes are read from each copy's log by our engine.
* Checkpoint of a log-only table of ``bench.gen`` (``FULL``: 3,000 commits, 30,000 live files,
  no checkpoint yet; its data files do not exist: a checkpoint reads only the log): ours (open +
  snapshot + ``write_checkpoint``) against delta-spark's ``DeltaLog.checkpoint()`` on a table it
  has never loaded (its snapshot load included).
* VACUUM of ``bench.vacuum``'s aged table (``FULL``: 30,000 files, half removed 30 days ago, 7-day
  retention): ours (open + ``vacuum``) against delta-spark's ``VACUUM``.

delta-spark's times are measured inside its session (``seconds`` of the server's answer): the JVM
start (reported apart), a warm-up of every step on a tiny table (``warm_up``) and the pipe are not
in them. The rows of every OPTIMIZE output are
counted from the log's statistics and must match the input's.

Memory: the peak of the summed resident set (``VmRSS``) of the process tree doing the work,
sampled every 50 ms during the step: for ours this process (Arrow executor) or this process and
its Spark JVM and Python workers (Spark executor), delta-spark's tree left out; for delta-spark
its server process and JVM. A JVM keeps the heap it once touched, so delta-spark's figure is a
high-water mark of its session so far, not of the step alone; ours is reported with the tree's
resident set just before the step too.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import gen
from bench import optimize as optimize_bench
from bench import vacuum as vacuum_bench
from bench.process import PeakRss

NAME = "deltaspark"
OUT_DIR = Path(__file__).resolve().parent / "out"
TARGET = optimize_bench.TARGET
ZORDER = ("id", "value")

#: a third of the sizes of ``bench.optimize``, ``bench.checkpoint`` and ``bench.vacuum``: every
#: contender runs on one shared two-core machine, delta-spark's steps there take minutes each
FULL = {
    "optimize": optimize_bench.Spec(files=300, rows_per_file=6500),
    "checkpoint": gen.TableSpec(commits=3_000, active_files=30_000, checkpoint=False, tail=0),
    "vacuum": (30, 1000),
}
QUICK = {
    "optimize": optimize_bench.Spec(files=60, rows_per_file=2000),
    "checkpoint": gen.TableSpec(
        commits=300, active_files=3_000, partitions=10, checkpoint=False, tail=0
    ),
    "vacuum": (10, 100),
}


def _log_figures(path: Path) -> dict[str, Any]:
    from txntable.engine.table import Table

    snapshot = Table.open(str(path)).snapshot()
    files = snapshot.files()
    rows = 0
    for stats in files.column("stats").to_pylist() if "stats" in files.column_names else []:
        if stats:
            rows += int(json.loads(stats).get("numRecords", 0))
    return {"files_after": snapshot.num_files, "bytes_after": snapshot.size_bytes, "rows": rows}


def _ours_optimize(path: Path, executor: Any, zorder: bool) -> dict[str, Any]:
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.maintenance.optimize import optimize

    policy = OptimizeOptions(target_file_size=TARGET, z_order_by=ZORDER if zorder else ())
    with _ours_memory() as memory:
        t0 = time.perf_counter()
        result = optimize(Table.open(str(path)), policy, executor)
        seconds = time.perf_counter() - t0
    if result.error:
        raise RuntimeError(result.error)
    return {"seconds": seconds, **memory.figures()}


#: the delta-spark server's pid, left out of our process tree's memory
_DS_PID: list[int] = []


def _ours_memory() -> PeakRss:
    return PeakRss(os.getpid(), exclude=_DS_PID[0] if _DS_PID else None)


def _theirs(ds: Any, op: str, **args: Any) -> dict[str, Any]:
    with PeakRss(ds.proc.pid) as memory:
        answer = ds.call(op, timeout=7200, **args)
    return {"seconds": answer["seconds"], **memory.figures()}


def _each(
    pristine: Path, work: Path, name: str, fn: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    copy = optimize_bench.fresh_copy(pristine, work / name)
    try:
        out = fn(copy)
        out.update(_log_figures(copy))
    except Exception as exc:  # a contender that fails is reported, the others still run
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    shutil.rmtree(copy, ignore_errors=True)
    return out


def run_optimize(ds: Any, spec: optimize_bench.Spec) -> dict[str, Any]:
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.executor_spark import SparkExecutor

    pristine = optimize_bench.generate(spec, OUT_DIR)
    input_bytes = optimize_bench.warm(pristine)
    rows_in = _log_figures(pristine)["rows"]
    work = OUT_DIR / f"{spec.key}.deltaspark-work"
    shutil.rmtree(work, ignore_errors=True)
    ds.call("sql", sql=f"SET spark.databricks.delta.optimize.maxFileSize = {TARGET}")
    results: dict[str, Any] = {}
    for zorder in (False, True):
        kind = "zorder" if zorder else "binpack"
        results[f"ours_arrow_{kind}"] = _each(
            pristine,
            work,
            f"arrow-{kind}",
            lambda p, z=zorder: _ours_optimize(p, ArrowExecutor(workers=2), z),
        )
        t0 = time.perf_counter()
        executor = SparkExecutor(master="local[2]")
        executor.warm_up()
        jvm = time.perf_counter() - t0
        try:
            results[f"ours_spark_{kind}"] = _each(
                pristine,
                work,
                f"spark-{kind}",
                lambda p, z=zorder, e=executor: _ours_optimize(p, e, z),
            )
        finally:
            executor.close()
        results[f"ours_spark_{kind}"]["jvm_start_seconds"] = round(jvm, 1)
        clause = f" ZORDER BY ({', '.join(ZORDER)})" if zorder else ""
        results[f"deltaspark_{kind}"] = _each(
            pristine,
            work,
            f"deltaspark-{kind}",
            lambda p, c=clause: _theirs(ds, "sql", sql=f"OPTIMIZE delta.`{p}`{c}"),
        )
    shutil.rmtree(work, ignore_errors=True)
    for r in results.values():
        if "rows" in r:
            r["rows_ok"] = r.pop("rows") == rows_in
    return {"files": spec.files, "input_bytes": input_bytes, "rows": rows_in, "results": results}


def run_checkpoint(ds: Any, spec: gen.TableSpec) -> dict[str, Any]:
    from txntable.engine.checkpoint.write import write_checkpoint
    from txntable.engine.table import Table

    pristine = gen.table_path(spec, OUT_DIR)
    work = OUT_DIR / f"{pristine.name}.deltaspark-work"
    shutil.rmtree(work, ignore_errors=True)

    def ours(p: Path) -> dict[str, Any]:
        with _ours_memory() as memory:
            t0 = time.perf_counter()
            result = write_checkpoint(Table.open(str(p)).snapshot())
            seconds = time.perf_counter() - t0
        return {"seconds": seconds, "checkpoint_bytes": result.size_in_bytes, **memory.figures()}

    out = {
        "ours": _checkpoint_copy(pristine, work / "ours", ours),
        "deltaspark": _checkpoint_copy(
            pristine, work / "theirs", lambda p: _theirs(ds, "checkpoint", path=str(p))
        ),
    }
    shutil.rmtree(work, ignore_errors=True)
    return {"commits": spec.commits, "files": spec.active_files, **out}


def _checkpoint_copy(
    pristine: Path, dest: Path, fn: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    shutil.copytree(pristine, dest)
    try:
        return fn(dest)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def run_vacuum(ds: Any, partitions: int, per_partition: int) -> dict[str, Any]:
    from txntable.engine.table import Table
    from txntable.engine.vacuum import vacuum

    pristine = vacuum_bench.generate(OUT_DIR, partitions, per_partition)
    work = OUT_DIR / f"{pristine.name}.deltaspark-work"
    shutil.rmtree(work, ignore_errors=True)
    before = len(vacuum_bench._files(pristine))

    def ours(p: Path) -> dict[str, Any]:
        with _ours_memory() as memory:
            t0 = time.perf_counter()
            vacuum(Table.open(str(p)).snapshot())
            seconds = time.perf_counter() - t0
        return {"seconds": seconds, **memory.figures()}

    def theirs(p: Path) -> dict[str, Any]:
        return _theirs(ds, "sql", sql=f"VACUUM delta.`{p}`")

    out: dict[str, Any] = {}
    kept = {}
    for name, fn in (("ours", ours), ("deltaspark", theirs)):
        copy = vacuum_bench._copy(pristine, work / name)
        try:
            out[name] = fn(copy)
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        kept[name] = vacuum_bench._files(copy)
        out[name]["deleted"] = before - len(kept[name])
    out["same_files_kept"] = kept["ours"] == kept["deltaspark"]
    shutil.rmtree(work, ignore_errors=True)
    return {"files": before, **out}


def warm_up(ds: Any, path: Path) -> None:
    """Every step once on a tiny table, before any clock: delta-spark's first OPTIMIZE, checkpoint
    and VACUUM load classes and compile code that later ones reuse (ours are warmed the same way:
    the Spark executor's ``warm_up``, the Arrow path's imports)."""
    shutil.rmtree(path, ignore_errors=True)
    ref = f"delta.`{path}`"
    for sql in (
        f"CREATE TABLE {ref} (id BIGINT, value DOUBLE, part STRING) USING delta "
        "PARTITIONED BY (part)",
        *[
            f"INSERT INTO {ref} SELECT id, rand(), 'p' FROM range({k * 10}, {k * 10 + 10})"
            for k in range(3)
        ],
        f"OPTIMIZE {ref}",
        f"INSERT INTO {ref} SELECT id, rand(), 'p' FROM range(100, 110)",
        f"OPTIMIZE {ref} ZORDER BY (id, value)",
        f"VACUUM {ref} RETAIN 0 HOURS",
    ):
        ds.call("sql", sql=sql)
    ds.call("checkpoint", path=str(path))
    shutil.rmtree(path, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    from tests.deltaspark.client import DeltaSpark

    sizes = QUICK if quick else FULL
    t0 = time.perf_counter()
    with DeltaSpark(log_dir=OUT_DIR / "deltaspark-log", conf={"spark.driver.memory": "4g"}) as ds:
        jvm = time.perf_counter() - t0
        _DS_PID[:] = [ds.proc.pid]
        warm_up(ds, OUT_DIR / "deltaspark-warm-up")
        result = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}",
            "delta_spark": f"delta-spark {ds.env.describe()['delta']} on Spark {ds.info['spark']}",
            "jvm_start_seconds": round(jvm, 1),
            "optimize": run_optimize(ds, sizes["optimize"]),
            "checkpoint": run_checkpoint(ds, sizes["checkpoint"]),
            "vacuum": run_vacuum(ds, *sizes["vacuum"]),
            "load_average": [round(x, 1) for x in os.getloadavg()],
        }
    return result


def _s(value: Any) -> str:
    return f"{value:.1f} s" if isinstance(value, int | float) else "—"


def _ratio(ours: Any, theirs: Any) -> str:
    """Ours over delta-spark's, as everywhere in docs/benchmarks.md (below 1: we are faster)."""
    if isinstance(ours, int | float) and isinstance(theirs, int | float) and theirs > 0:
        return f"{ours / theirs:.2f}"
    return "—"


def render(result: dict[str, Any]) -> str:
    o = result["optimize"]
    r = o["results"]
    lines = [
        f"{result['delta_spark']} against ours, {result['machine']} "
        f"(load average after the run: {result['load_average']}); delta-spark's JVM start "
        f"({result['jvm_start_seconds']} s) is not in its times. Ratio: our time over "
        "delta-spark's (below 1: we are faster).",
        "",
        f"OPTIMIZE of {o['files']} files, {o['input_bytes'] / 1e6:.0f} MB, {o['rows']} rows, "
        f"target 128 MiB (Z-order by {', '.join(ZORDER)}):",
        "",
        "| contender | bin-pack | files / MB after | Z-order | files / MB after | rows kept |",
        "|---|---|---|---|---|---|",
    ]
    for label, key in (
        ("ours, Arrow executor", "ours_arrow"),
        ("ours, Spark executor", "ours_spark"),
        ("delta-spark", "deltaspark"),
    ):
        b, z = r[f"{key}_binpack"], r[f"{key}_zorder"]
        lines.append(
            f"| {label} | {_s(b.get('seconds'))} | {_files(b)} | {_s(z.get('seconds'))} | "
            f"{_files(z)} | {b.get('rows_ok', '—')} / {z.get('rows_ok', '—')} |"
        )
    lines += ["", "| ratio (ours / delta-spark) | bin-pack | Z-order |", "|---|---|---|"]
    for label, key in (("Arrow executor", "ours_arrow"), ("Spark executor", "ours_spark")):
        lines.append(
            f"| {label} | "
            f"{_ratio(r[f'{key}_binpack'].get('seconds'), r['deltaspark_binpack'].get('seconds'))}"
            f" | {_ratio(r[f'{key}_zorder'].get('seconds'), r['deltaspark_zorder'].get('seconds'))}"
            " |"
        )
    c, v = result["checkpoint"], result["vacuum"]
    lines += [
        "",
        "| maintenance | ours | delta-spark | ratio |",
        "|---|---|---|---|",
        f"| checkpoint, {c['commits']} commits, {c['files']} files | "
        f"{_s(c['ours'].get('seconds'))} | {_s(c['deltaspark'].get('seconds'))} | "
        f"{_ratio(c['ours'].get('seconds'), c['deltaspark'].get('seconds'))} |",
        f"| VACUUM, {v['files']} files, {v['ours'].get('deleted')} deleted by ours, "
        f"{v['deltaspark'].get('deleted')} by delta-spark | {_s(v['ours'].get('seconds'))} | "
        f"{_s(v['deltaspark'].get('seconds'))} | "
        f"{_ratio(v['ours'].get('seconds'), v['deltaspark'].get('seconds'))} |",
        "",
        f"Both VACUUMs kept the same files: {v['same_files_kept']}.",
        "",
        "Peak resident memory of the process tree doing the step (MB; in brackets: just before "
        "it; delta-spark's JVM keeps what its session once touched):",
        "",
        "| step | ours, Arrow executor | ours, Spark executor | delta-spark |",
        "|---|---|---|---|",
        f"| OPTIMIZE bin-pack | {_mem(r['ours_arrow_binpack'])} | {_mem(r['ours_spark_binpack'])} "
        f"| {_mem(r['deltaspark_binpack'])} |",
        f"| OPTIMIZE Z-order | {_mem(r['ours_arrow_zorder'])} | {_mem(r['ours_spark_zorder'])} "
        f"| {_mem(r['deltaspark_zorder'])} |",
        f"| checkpoint | {_mem(c['ours'])} | — | {_mem(c['deltaspark'])} |",
        f"| VACUUM | {_mem(v['ours'])} | — | {_mem(v['deltaspark'])} |",
    ]
    errors = [f"optimize {k}: {x['error']}" for k, x in r.items() if "error" in x]
    for name, part in (("checkpoint", c), ("vacuum", v)):
        for k in ("ours", "deltaspark"):
            if "error" in part[k]:
                errors.append(f"{name} {k}: {part[k]['error']}")
    if errors:
        lines += ["", "Failed: " + "; ".join(sorted(set(errors)))]
    return "\n".join(lines)


def _mem(r: dict[str, Any]) -> str:
    if "peak_rss_mb" not in r:
        return "—"
    return f"{r['peak_rss_mb']} ({r['rss_before_mb']})"


def _files(r: dict[str, Any]) -> str:
    if "files_after" not in r:
        return "—"
    return f"{r['files_after']} / {r['bytes_after'] / 1e6:.0f}"


#: issue 31.4, for a quiet machine (``python -m bench.deltaspark --rounds 3``): the sizes of
#: ``bench.checkpoint`` (100,000 files) and ``bench.vacuum`` themselves, and a quarter of
#: ``bench.optimize``'s 4,000 files (delta-spark's bin-pack and Z-order of all 4,000 would take
#: about half an hour a round here); ``--optimize-files 4000`` for the whole of it
WHOLE = {
    "optimize": optimize_bench.Spec(files=1000, rows_per_file=optimize_bench.FULL.rows_per_file),
    "checkpoint": gen.TableSpec(commits=10_000, active_files=100_000, checkpoint=False, tail=0),
    "vacuum": (100, 1000),
}
#: the figures a round gives, by where they are in ``run``'s result: (label, path to seconds)
STEPS = (
    ("OPTIMIZE bin-pack, ours (Arrow executor)", ("optimize", "results", "ours_arrow_binpack")),
    ("OPTIMIZE bin-pack, ours (Spark executor)", ("optimize", "results", "ours_spark_binpack")),
    ("OPTIMIZE bin-pack, delta-spark", ("optimize", "results", "deltaspark_binpack")),
    ("OPTIMIZE Z-order, ours (Arrow executor)", ("optimize", "results", "ours_arrow_zorder")),
    ("OPTIMIZE Z-order, ours (Spark executor)", ("optimize", "results", "ours_spark_zorder")),
    ("OPTIMIZE Z-order, delta-spark", ("optimize", "results", "deltaspark_zorder")),
    ("checkpoint, ours", ("checkpoint", "ours")),
    ("checkpoint, delta-spark", ("checkpoint", "deltaspark")),
    ("VACUUM, ours", ("vacuum", "ours")),
    ("VACUUM, delta-spark", ("vacuum", "deltaspark")),
)


def run_rounds(sizes: dict[str, Any], rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of every step in one delta-spark session (its JVM start and warm-up
    once, outside every clock), each on fresh copies, with the load average before each."""
    from tests.deltaspark.client import DeltaSpark

    out: dict[str, Any] = {"rounds": []}
    t0 = time.perf_counter()
    with DeltaSpark(log_dir=OUT_DIR / "deltaspark-log", conf={"spark.driver.memory": "4g"}) as ds:
        out["jvm_start_seconds"] = round(time.perf_counter() - t0, 1)
        _DS_PID[:] = [ds.proc.pid]
        warm_up(ds, OUT_DIR / "deltaspark-warm-up")
        out["delta_spark"] = f"delta-spark {ds.env.describe()['delta']} on Spark {ds.info['spark']}"
        for _ in range(rounds):
            load = [round(x, 2) for x in os.getloadavg()]
            one = {
                "load_before": load,
                "optimize": run_optimize(ds, sizes["optimize"]),
                "checkpoint": run_checkpoint(ds, sizes["checkpoint"]),
                "vacuum": run_vacuum(ds, *sizes["vacuum"]),
            }
            out["rounds"].append(one)
            print(f"round {len(out['rounds'])}/{rounds} done, load before {load}", flush=True)
    out["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    return out


def _at(result: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        result = result[key]
    return result


def render_rounds(result: dict[str, Any]) -> str:
    import statistics

    rounds = result["rounds"]
    first = rounds[0]
    o, c, v = first["optimize"], first["checkpoint"], first["vacuum"]
    loads = ", ".join(f"{r['load_before'][0]:.2f}" for r in rounds)
    lines = [
        f"{result['delta_spark']} against ours, {result['machine']}; {len(rounds)} rounds in "
        f"one delta-spark session (its JVM start, {result['jvm_start_seconds']} s, and a "
        f"warm-up of every step outside the clocks); 1-minute load average before each round: "
        f"{loads}.",
        f"OPTIMIZE of {o['files']:,} files ({o['input_bytes'] / 1e9:.2f} GB, {o['rows']:,} rows, "
        f"target 128 MiB, Z-order by {', '.join(ZORDER)}); checkpoint of {c['commits']:,} "
        f"commits and {c['files']:,} files (no checkpoint before); VACUUM of {v['files']:,} files "
        "(half removed 30 days ago, 7-day retention).",
        "",
        "| step | median | min-max | ratio of medians, ours / delta-spark | peak RSS of the "
        "process tree, median (just before the step) |",
        "|---|---:|---:|---:|---:|",
    ]
    medians: dict[str, float] = {}
    rows: list[tuple[str, list[float], list[tuple[float, float]]]] = []
    for label, path in STEPS:
        got = [_at(r, path) for r in rounds]
        seconds = [g["seconds"] for g in got if "seconds" in g]
        peaks = [
            (float(g["peak_rss_mb"]), float(g["rss_before_mb"])) for g in got if "peak_rss_mb" in g
        ]
        rows.append((label, seconds, peaks))
        if seconds:
            medians[label] = statistics.median(seconds)
    for label, seconds, peaks in rows:
        if not seconds:
            lines.append(f"| {label} | failed in every round | | | |")
            continue
        theirs = medians.get(label.rsplit(", ", 1)[0] + ", delta-spark")
        ratio = "" if "delta-spark" in label or not theirs else f"**{medians[label] / theirs:.2f}**"
        peak = (
            f"{statistics.median(p for p, _ in peaks):.0f} "
            f"({statistics.median(b for _, b in peaks):.0f}) MB"
            if peaks
            else "—"
        )
        lines.append(
            f"| {label} | {medians[label]:.1f} s | {min(seconds):.1f}-{max(seconds):.1f} s "
            f"| {ratio} | {peak} |"
        )
    checks = [
        all(x.get("rows_ok", False) for r in rounds for x in r["optimize"]["results"].values()),
        all(r["vacuum"]["same_files_kept"] for r in rounds),
    ]
    failed = sorted(
        {
            f"{label}: {_at(r, path)['error']}"
            for r in rounds
            for label, path in STEPS
            if "error" in _at(r, path)
        }
    )
    lines += [
        "",
        f"Every OPTIMIZE kept every row: {checks[0]}. Both VACUUMs kept the same files in every "
        f"round: {checks[1]}.",
    ]
    if failed:
        lines += ["", "Failed: " + "; ".join(failed)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json as json_module

    parser = argparse.ArgumentParser(prog="python -m bench.deltaspark", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--size", choices=("whole", "third", "quick"), default="whole",
        help="whole: the optimize/checkpoint/vacuum benchmarks' own sizes (issue 31.4)",
    )  # fmt: skip
    parser.add_argument("--optimize-files", type=int, help="files of the OPTIMIZE table")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--report", type=Path, help="only print the table of a --json file")
    args = parser.parse_args(argv)
    if args.report:
        print(render_rounds(json_module.loads(args.report.read_text())))
        return 0
    sizes = dict({"whole": WHOLE, "third": FULL, "quick": QUICK}[args.size])
    if args.optimize_files:
        sizes["optimize"] = optimize_bench.Spec(
            args.optimize_files, sizes["optimize"].rows_per_file
        )
    result = run_rounds(sizes, args.rounds)
    if args.json:
        args.json.write_text(json_module.dumps(result, indent=1, default=str) + "\n")
    print(render_rounds(result))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
