"""Read-path benchmark: loading the latest snapshot of a big table, ours against deltalake.

Both engines run in this one process, alternating repetition by repetition so that disk cache and
CPU frequency treat them alike; each repetition opens the table afresh (no caching between
repetitions). Peak memory is measured in a separate subprocess per engine, because a process's
peak RSS cannot be reset. Rows:

* ``checkpoint``: a log with a delta-rs checkpoint and a few commits after it (the headline);
* ``replay``: a log without any checkpoint, replayed from commit 0;
* ``refresh``: an already-loaded snapshot brought forward by the commits after it.

Memory, per case and engine: the peak RSS of a fresh interpreter that imports the engine and
loads the table once, as a user's script does (median of ``RSS_ROUNDS``, engines alternating).
Ours is measured on pyarrow's default pool (what a script gets) and on the system allocator
(what the images and the CLI's one-shot commands choose, ``txntable.arrow_pool``).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gen import TableSpec, table_path

NAME = "read_snapshot"

FULL = {
    "checkpoint": TableSpec(),
    # the most commits delta-rs's cadence ((v + 1) % 100 == 0) leaves after a checkpoint
    "long_tail": TableSpec(commits=9_900, tail=99),
    "replay": TableSpec(commits=1_000, active_files=10_000, checkpoint=False, tail=0),
}
QUICK = {
    "checkpoint": TableSpec(commits=500, active_files=5_000, tail=10),
    "long_tail": TableSpec(commits=400, active_files=5_000, tail=99),
    "replay": TableSpec(commits=100, active_files=1_000, checkpoint=False, tail=0),
}
TINY = {
    "checkpoint": TableSpec(commits=20, active_files=200, remove_every=5, removes_per=2, tail=3),
    "long_tail": TableSpec(commits=10, active_files=200, remove_every=5, removes_per=2, tail=9),
    "replay": TableSpec(commits=10, active_files=100, checkpoint=False, tail=0),
}


def _ours_load(path: str) -> int:
    from txntable.engine.table import Table

    return len(Table.open(path).snapshot().file_uris())


def _theirs_load(path: str) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


def _ours_refresh_setup(path: str, version: int) -> Callable[[], int]:
    from txntable.engine.table import Table

    snapshot = Table.open(path).snapshot(version=version)
    return lambda: len(snapshot.refresh().file_uris())


def _theirs_refresh_setup(path: str, version: int) -> Callable[[], int]:
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)

    def step() -> int:
        table.update_incremental()
        return len(table.file_uris())

    return step


def same_uris(path: str) -> bool:
    """Whether both engines list exactly the same file locations (untimed sanity check)."""
    from deltalake import DeltaTable

    from txntable.engine.table import Table

    ours = Table.open(path).snapshot().file_uris()
    return sorted(ours) == sorted(DeltaTable(path).file_uris())


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    gc.collect()
    start = time.perf_counter()
    count = fn()
    return time.perf_counter() - start, count


def _compare(
    ours: Callable[[], Callable[[], int]],
    theirs: Callable[[], Callable[[], int]],
    reps: int,
) -> dict[str, Any]:
    """Alternate the engines (swapping who goes first each time); ``ours()``/``theirs()`` build
    the callable to time, untimed, so refresh can load its starting snapshot first."""
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    counts: dict[str, set[int]] = {"ours": set(), "theirs": set()}
    order = [("ours", ours), ("theirs", theirs)]
    _timed(ours())  # warm-up: imports, page cache
    _timed(theirs())
    for rep in range(reps):
        for name, build in order if rep % 2 == 0 else order[::-1]:
            elapsed, count = _timed(build())
            times[name].append(elapsed)
            counts[name].add(count)
    ours_median = statistics.median(times["ours"])
    theirs_median = statistics.median(times["theirs"])
    return {
        "ours_s": ours_median,
        "theirs_s": theirs_median,
        "ours_min_s": min(times["ours"]),
        "theirs_min_s": min(times["theirs"]),
        "ratio": ours_median / theirs_median,
        "ratio_best": min(times["ours"]) / min(times["theirs"]),
        "files_ours": sorted(counts["ours"]),
        "files_theirs": sorted(counts["theirs"]),
        "reps": reps,
    }


#: the memory children: (name, engine, Arrow pool: None = pyarrow's default)
RSS_ENGINES = (
    ("ours", "ours", None),
    ("ours_system", "ours", "system"),
    ("theirs", "theirs", None),
)
RSS_ROUNDS = 3


def peak_rss_mb(engine: str, path: str, pool: str | None = None) -> dict[str, float]:
    """Peak RSS of a fresh interpreter that imports one engine, then loads the table once."""
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    if pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool
    out = subprocess.run(
        [sys.executable, "-m", "bench.read_snapshot", "--rss", engine, path],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def memory(tables: dict[str, str], rounds: int = RSS_ROUNDS) -> dict[str, Any]:
    """Per case and engine, the medians over ``rounds`` fresh children (engines alternating,
    who goes first rotating) of their peak RSS, RSS after imports and first-load seconds, and
    ours over deltalake's peak."""
    out: dict[str, Any] = {}
    for case in ("checkpoint", "long_tail", "replay"):
        samples: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in RSS_ENGINES}
        for r in range(rounds):
            order = RSS_ENGINES[r % 3 :] + RSS_ENGINES[: r % 3]
            for name, engine, pool in order:
                samples[name].append(peak_rss_mb(engine, tables[case], pool))
        row: dict[str, Any] = {
            name: {k: statistics.median(x[k] for x in got) for k in got[0]}
            for name, got in samples.items()
        }
        theirs = row["theirs"]["peak_mb"]
        row["ratio"] = row["ours"]["peak_mb"] / theirs
        row["ratio_system"] = row["ours_system"]["peak_mb"] / theirs
        out[case] = row
    return out


def _pythonpath() -> str:
    repo = Path(__file__).resolve().parents[1]
    parts = [str(repo), str(repo / "operator"), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


def _vm_hwm_mb() -> float:
    """Peak RSS of this process image. ``getrusage``'s ``ru_maxrss`` would not do: Linux carries
    the parent's peak across fork and exec, so a child would report its parent's size."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rss_main(engine: str, path: str) -> None:
    if engine == "ours":
        import pyarrow  # noqa: F401

        import txntable.engine.table  # noqa: F401
    else:
        import deltalake  # noqa: F401
    before = _vm_hwm_mb()
    started = time.perf_counter()
    count = _ours_load(path) if engine == "ours" else _theirs_load(path)
    seconds = time.perf_counter() - started
    after = _vm_hwm_mb()
    print(
        json.dumps({"after_import_mb": before, "peak_mb": after, "load_s": seconds, "files": count})
    )


def run_specs(
    specs: dict[str, TableSpec], reps: int, out_dir: Path | None = None
) -> dict[str, Any]:
    """Generate (or reuse) the tables and measure every row."""
    started = time.time()
    tables = {name: str(table_path(spec, out_dir)) for name, spec in specs.items()}
    rows: dict[str, Any] = {}
    ckpt = tables["checkpoint"]
    rows["checkpoint"] = _compare(
        lambda: lambda: _ours_load(ckpt), lambda: lambda: _theirs_load(ckpt), reps
    )
    tail = tables["long_tail"]
    rows["long_tail"] = _compare(
        lambda: lambda: _ours_load(tail), lambda: lambda: _theirs_load(tail), reps
    )
    replay = tables["replay"]
    rows["replay"] = _compare(
        lambda: lambda: _ours_load(replay), lambda: lambda: _theirs_load(replay), reps
    )
    spec = specs["checkpoint"]
    start_version = spec.last_version - spec.tail
    rows["refresh"] = _compare(
        lambda: _ours_refresh_setup(ckpt, start_version),
        lambda: _theirs_refresh_setup(ckpt, start_version),
        reps,
    )
    rss = memory(tables)
    return {
        "specs": {name: spec.__dict__ for name, spec in specs.items()},
        "rows": rows,
        "same_uris": {name: same_uris(path) for name, path in tables.items()},
        "rss": rss,
        "machine": _machine(),
        "wall_s": time.time() - started,
        "load": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def run(quick: bool) -> dict[str, Any]:
    return run_specs(QUICK if quick else FULL, reps=3 if quick else 15)


def _machine() -> dict[str, str]:
    import deltalake
    import pyarrow

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
        "deltalake": deltalake.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def render(result: dict[str, Any]) -> str:
    specs, rows, rss, m = result["specs"], result["rows"], result["rss"], result["machine"]
    ck, lt, rp = specs["checkpoint"], specs["long_tail"], specs["replay"]
    tail = ck["tail"]
    labels = {
        "checkpoint": (
            f"**latest snapshot + `file_uris()`**: {ck['active_files']:,} live files, "
            f"{ck['commits'] + tail:,} commits, delta-rs checkpoint at "
            f"{ck['commits'] - 1} + {tail} commits"
        ),
        "long_tail": (
            f"same, checkpoint at {lt['commits'] - 1} + {lt['tail']} commits "
            f"({lt['active_files']:,} live files)"
        ),
        "replay": (
            f"cold replay, no checkpoint: {rp['commits']:,} commits, "
            f"{rp['active_files']:,} live files"
        ),
        "refresh": (
            f"incremental `refresh()` by {tail} commits on the {ck['active_files']:,}-file "
            "snapshot, + `file_uris()`"
        ),
    }
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, "
        f"pyarrow {m['pyarrow']}, deltalake {m['deltalake']}; measured {m['date']}.",
        "",
        "| case | ours median | deltalake median | ratio of medians | ours best "
        "| deltalake best | ratio of bests | files |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in ("checkpoint", "long_tail", "replay", "refresh"):
        r = rows[key]
        files = "/".join(str(n) for n in sorted(set(r["files_ours"]) | set(r["files_theirs"])))
        lines.append(
            f"| {labels[key]} | {r['ours_s'] * 1000:.0f} ms | {r['theirs_s'] * 1000:.0f} ms "
            f"| **{r['ratio']:.2f}x** | {r['ours_min_s'] * 1000:.0f} ms "
            f"| {r['theirs_min_s'] * 1000:.0f} ms | {r['ratio_best']:.2f}x | {files} |"
        )
    lines += [
        "",
        f"{rows['checkpoint']['reps']} alternating repetitions per case after one warm-up each; "
        f"whole run {result['wall_s']:.0f} s, load average {result.get('load', '?')} "
        "at the end (other work on the machine inflates medians more than bests).",
        "",
        "Both engines list exactly the same file locations on every table: "
        f"{'yes' if all(result['same_uris'].values()) else 'NO: ' + str(result['same_uris'])}.",
        "",
        "Peak RSS: a fresh interpreter imports the engine and loads the table once (+ "
        f"`file_uris()`), median of {RSS_ROUNDS} per engine; ours on pyarrow's default pool and "
        "on the system allocator. Goal: ours at most 1.00x deltalake's peak.",
        "",
        "| case | ours peak | ours peak, system allocator | deltalake peak | ratio "
        "| ratio, system allocator | after imports: ours / deltalake "
        "| first load: ours / ours, system / deltalake |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in ("checkpoint", "long_tail", "replay"):
        if key not in rss:  # a result recorded before every case had its memory
            continue
        r = rss[key]
        o, sy, t = r["ours"], r["ours_system"], r["theirs"]
        lines.append(
            f"| {key} | {o['peak_mb']:.0f} MB | {sy['peak_mb']:.0f} MB | {t['peak_mb']:.0f} MB "
            f"| **{r['ratio']:.2f}x** | **{r['ratio_system']:.2f}x** "
            f"| {o['after_import_mb']:.0f} / {t['after_import_mb']:.0f} MB "
            f"| {o['load_s']:.2f} / {sy['load_s']:.2f} / {t['load_s']:.2f} s |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss"]:
        if len(sys.argv) != 4 or sys.argv[2] not in ("ours", "theirs"):
            raise SystemExit("usage: python -m bench.read_snapshot --rss ours|theirs TABLE")
        _rss_main(sys.argv[2], sys.argv[3])
    else:
        print(render(run(quick="--quick" in sys.argv)))
