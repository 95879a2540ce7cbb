"""Checkpoint benchmark: writing a checkpoint of a big table, ours against deltalake.

The tables come from ``bench.gen`` (a delta-rs checkpoint followed by ten commits, the state in
which the next checkpoint is due), with 100,000 and 1,000,000 live files. Every measurement runs in
a fresh interpreter on a fresh copy of the log (hard links, so the cached table is never touched),
alternating which engine goes first. Each child reports:

* ``open``: loading the latest snapshot (``Table.open().snapshot()`` / ``DeltaTable()``);
* ``checkpoint``: writing the checkpoint of that loaded snapshot (``write_checkpoint`` /
  ``create_checkpoint()``), which is what the two engines do differently;
* ``reload``: loading the table again from the checkpoint just written, plus ``file_uris()``;
* ``cross``: the other engine loading that checkpoint (deltalake reading ours, and ours theirs);
* peak RSS (``VmHWM``) of the child after open + checkpoint;
* ``process``: the whole process as a user runs it, ``txntable checkpoint PATH`` (its entry
  point chooses the Arrow allocator, ``txntable.arrow_pool``) against a script calling
  ``DeltaTable(PATH).create_checkpoint()``: wall time from outside, peak RSS (``bench.process``).

``ours`` runs with pyarrow's default memory pool (mimalloc); ``ours, system allocator`` with
``ARROW_DEFAULT_MEMORY_POOL=system`` in its environment (it must be set before pyarrow is
imported; ``pa.set_memory_pool`` at run time switches only the Python-side allocations and makes
the peak worse): mimalloc keeps freed pages mapped, glibc returns them.
"""

from __future__ import annotations

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

from bench.gen import TableSpec, table_path
from bench.process import run_cli, run_script

NAME = "checkpoint"

FULL = {
    "100k": (TableSpec(commits=1_000, active_files=100_000, tail=10), 5),
    "1M": (TableSpec(commits=2_000, active_files=1_000_000, tail=10), 5),
}
QUICK = {"5k": (TableSpec(commits=100, active_files=5_000, tail=10), 2)}

_REPO = Path(__file__).resolve().parents[1]
#: the peer's whole process: what a user of deltalake runs to checkpoint a table
_THEIRS_SCRIPT = (
    "import sys\nfrom deltalake import DeltaTable\nDeltaTable(sys.argv[1]).create_checkpoint()\n"
)
#: nothing chosen for the processes: each entry point decides (the CLI picks its pool)
_AS_USERS_RUN = {"ARROW_DEFAULT_MEMORY_POOL": None}


def _whole_process(engine: str, path: Path) -> dict[str, float]:
    if engine == "ours":
        done = run_cli(["checkpoint", str(path), "--json"], _AS_USERS_RUN)
        if json.loads(done["stdout"])["existing"]:
            raise RuntimeError(f"{path} had its checkpoint already: nothing was written")
    else:
        done = run_script(_THEIRS_SCRIPT, [str(path)], _AS_USERS_RUN)
    return {"process_s": done["process_s"], "peak_mb": done["peak_mb"]}


def _vm_hwm_mb() -> float:
    """Peak RSS of this process image (``ru_maxrss`` would include the parent's peak on Linux,
    which fork+exec carries over)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _child(engine: str, mode: str, path: str) -> dict[str, Any]:
    if engine == "ours-system":  # the same code; the parent set ARROW_DEFAULT_MEMORY_POOL
        engine = "ours"
    if engine == "ours":
        from txntable.engine.checkpoint.write import write_checkpoint
        from txntable.engine.table import Table

        def load() -> Any:
            return Table.open(path).snapshot()

        def files(obj: Any) -> int:
            return len(obj.file_uris())

        def checkpoint(obj: Any) -> None:
            write_checkpoint(obj)

    else:
        from deltalake import DeltaTable

        def load() -> Any:
            return DeltaTable(path)

        def files(obj: Any) -> int:
            return len(obj.file_uris())

        def checkpoint(obj: Any) -> None:
            obj.create_checkpoint()

    out: dict[str, Any] = {"after_import_mb": _vm_hwm_mb()}
    t0 = time.perf_counter()
    table = load()
    t1 = time.perf_counter()
    if mode == "load":
        out.update(load_s=t1 - t0, files=files(table))
        return out
    checkpoint(table)
    t2 = time.perf_counter()
    out.update(open_s=t1 - t0, checkpoint_s=t2 - t1, peak_mb=_vm_hwm_mb())
    del table
    t3 = time.perf_counter()
    again = load()
    out.update(files=files(again), reload_s=time.perf_counter() - t3)
    return out


def _run_child(engine: str, mode: str, path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_REPO), str(_REPO / "operator")])}
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    if engine == "ours-system":
        env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.checkpoint", "--child", engine, mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=_REPO,
        env=env,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _fresh_copy(src: Path, dest: Path) -> Path:
    """The table's log under ``dest``: hard links to the immutable files, a copy of the hint."""
    log = dest / "_delta_log"
    log.mkdir(parents=True)
    for f in (src / "_delta_log").iterdir():
        if f.is_file():
            if f.name == "_last_checkpoint":
                shutil.copy2(f, log / f.name)
            else:
                os.link(f, log / f.name)
    return dest


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def measure(spec: TableSpec, reps: int, out_dir: Path | None = None) -> dict[str, Any]:
    """Medians over ``reps`` alternating repetitions (tables cached in ``out_dir``)."""
    source = table_path(spec, out_dir)
    engines = ["ours", "ours-system", "theirs"]
    samples: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    cross: dict[str, list[float]] = {"theirs_reads_ours": [], "ours_reads_theirs": []}
    process: dict[str, list[dict[str, float]]] = {"ours": [], "theirs": []}
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        for rep in range(reps):
            order = engines if rep % 2 == 0 else engines[::-1]
            dirs = {}
            for engine in order:
                dirs[engine] = _fresh_copy(source, Path(tmp) / f"{rep}-{engine}")
                samples[engine].append(_run_child(engine, "checkpoint", dirs[engine]))
            cross["theirs_reads_ours"].append(_run_child("theirs", "load", dirs["ours"])["load_s"])
            cross["ours_reads_theirs"].append(_run_child("ours", "load", dirs["theirs"])["load_s"])
            for d in dirs.values():
                shutil.rmtree(d)
            for engine in ("ours", "theirs") if rep % 2 == 0 else ("theirs", "ours"):
                copy = _fresh_copy(source, Path(tmp) / f"{rep}-{engine}-process")
                process[engine].append(_whole_process(engine, copy))
                shutil.rmtree(copy)
    row: dict[str, Any] = {"active_files": spec.active_files, "reps": reps}
    for sample in [s for e in engines for s in samples[e]]:
        sample["peak_above_imports_mb"] = sample["peak_mb"] - sample["after_import_mb"]
        sample["total_s"] = sample["open_s"] + sample["checkpoint_s"]
    keys = ("open_s", "checkpoint_s", "total_s", "reload_s", "peak_mb", "peak_above_imports_mb")
    for key in keys:
        m = {e: _median([s[key] for s in samples[e]]) for e in engines}
        row[key] = {
            **m,
            "ratio": m["ours"] / m["theirs"],
            "ratio_system": m["ours-system"] / m["theirs"],
        }
    row["cross_load_s"] = {k: _median(v) for k, v in cross.items()}
    for key in ("process_s", "peak_mb"):
        m = {e: _median([s[key] for s in process[e]]) for e in process}
        row[f"process_{key}"] = {**m, "ratio": m["ours"] / m["theirs"]}
    row["files"] = sorted({s["files"] for e in samples for s in samples[e]})
    return row


def run(quick: bool) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    started = time.time()
    rows = {name: measure(spec, reps) for name, (spec, reps) in sizes.items()}
    return {"rows": rows, "machine": machine(), "wall_s": time.time() - started}


def machine() -> dict[str, str]:
    import deltalake
    import pyarrow

    return {
        "cores": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "pyarrow": pyarrow.__version__,
        "deltalake": deltalake.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"{m['cores']} cores; Python {m['python']}, pyarrow {m['pyarrow']}, deltalake "
        f"{m['deltalake']}; measured {m['date']} (load average at the end: {m['load_average']}).",
        "Tables: a delta-rs checkpoint followed by 10 commits. Medians; ratio = ours / deltalake "
        "(below 1 is better for us).",
        "",
        "| live files | step | ours | ours, system allocator | deltalake | ratio | ratio, system "
        "allocator |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    labels = [
        ("checkpoint_s", "write the checkpoint (snapshot loaded)"),
        ("total_s", "open + write the checkpoint"),
        ("open_s", "open the table (before)"),
        ("reload_s", "load from its own new checkpoint + `file_uris()`"),
    ]
    for name, row in result["rows"].items():
        files = f"{row['active_files']:,}"
        for key, label in labels:
            r = row[key]
            lines.append(
                f"| {files} | {label} | {r['ours']:.2f} s | {r['ours-system']:.2f} s "
                f"| {r['theirs']:.2f} s | **{r['ratio']:.2f}x** | **{r['ratio_system']:.2f}x** |"
            )
        for key, label in (
            ("peak_mb", "peak RSS (open + checkpoint)"),
            ("peak_above_imports_mb", "the same, above the engine's import footprint"),
        ):
            pk = row[key]
            ratios = f"**{pk['ratio']:.2f}x** | **{pk['ratio_system']:.2f}x**"
            lines.append(
                f"| {files} | {label} | {pk['ours']:.0f} MB | {pk['ours-system']:.0f} MB "
                f"| {pk['theirs']:.0f} MB | {ratios} |"
            )
        if "process_peak_mb" in row:  # recorded before the whole-process rows existed: none
            t, pk = row["process_process_s"], row["process_peak_mb"]
            lines += [
                f"| {files} | **whole process as users run it**: `txntable checkpoint` / a "
                f"`create_checkpoint()` script | {t['ours']:.2f} s | | {t['theirs']:.2f} s "
                f"| **{t['ratio']:.2f}x** | |",
                f"| {files} | the same, peak RSS | {pk['ours']:.0f} MB | | {pk['theirs']:.0f} MB "
                f"| **{pk['ratio']:.2f}x** | |",
            ]
        cross = row["cross_load_s"]
        lines.append(
            f"| {files} | the other engine loads it: deltalake reads ours / we read theirs "
            f"| {cross['theirs_reads_ours']:.2f} s | | {cross['ours_reads_theirs']:.2f} s | | |"
        )
        del name
    return "\n".join(lines) + "\n"


def _main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "--child":
        print(json.dumps(_child(argv[1], argv[2], argv[3])))
        return 0
    result = run(quick="--quick" in argv)
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
