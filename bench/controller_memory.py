"""Memory of observing big tables: what the controller keeps per table, and one load's peak.

The controller used to keep a full ``Snapshot`` per TxnTable; it now keeps a ``TableSummary``
(``txntable.engine.read.summary``). Every row runs in a fresh interpreter (a process's peak RSS
cannot be reset) on the read-path benchmark's 100,000-file table (``bench.gen``, a delta-rs
checkpoint plus 10 commits):

* ``hold``: load the table N times and keep each result, as a controller watching N such
  tables would: N snapshots (before) against N summaries (now). Reported: RSS after the N loads
  above the RSS after imports (whole process), the Arrow bytes still allocated and the Python
  bytes still allocated (tracemalloc), both in process.
* ``once``: one load and what the observation needs, whole-process peak RSS side by side with
  deltalake doing the same: ours full snapshot + ``observe`` (before), ours summary +
  ``observe_summary`` (now), deltalake ``DeltaTable`` + ``get_add_actions`` (the sizes and
  partitions an observation needs), and both engines' load + ``file_uris()`` (the row
  ``read_snapshot`` reports).

* ``fleet``: summaries of 20 x M tables in one process, M of them the 100,000-file table and
  the others a 200-file one (M = 50: the issue's 1,000 tables of which 50 are big); whole-process
  RSS after the loads. Kopf, the API client and the runs are not in this process: the scale
  benchmark (``bench/scale.py``) measures the controller itself.

``python -m bench.controller_memory [--tiny] [--n N] [--fleet M]`` prints Markdown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.gen import TableSpec, table_path
from bench.read_snapshot import _machine, _pythonpath, _vm_hwm_mb

NAME = "controller_memory"
SPEC = TableSpec()
TINY = TableSpec(commits=20, active_files=200, remove_every=5, removes_per=2, tail=3)


def _vm_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _child(mode: str, path: str, n: int) -> dict[str, Any]:
    if mode.startswith("deltalake"):
        from deltalake import DeltaTable

        before = _vm_hwm_mb()
        table = DeltaTable(path)
        files = table.file_uris() if mode == "deltalake_uris" else table.get_add_actions()
        count = len(files)
        return {"after_import_mb": before, "peak_mb": _vm_hwm_mb(), "files": count}
    import pyarrow as pa
    from tests.support.health_oracle import observe

    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.read.summary import TableSummary
    from txntable.engine.storage.factory import open_storage
    from txntable.reconcile.health import observe_summary

    storage = open_storage(path)
    before_hwm, before_rss = _vm_hwm_mb(), _vm_rss_mb()
    if mode == "ours_snapshot":
        count = observe(Snapshot.load(storage), 1 << 20).files
    elif mode == "ours_summary":
        count = observe_summary(TableSummary.load(storage), 1 << 20).files
    elif mode == "ours_uris":
        count = len(Snapshot.load(storage).file_uris())
    elif mode in ("hold_snapshots", "hold_summaries"):
        tracemalloc.start()
        held: list[Any] = []
        for _ in range(n):
            if mode == "hold_snapshots":
                held.append(Snapshot.load(storage))
            else:
                held.append(TableSummary.load(storage))
        python_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return {
            "after_import_mb": before_rss,
            "rss_mb": _vm_rss_mb(),
            "peak_mb": _vm_hwm_mb(),
            "arrow_mb": pa.total_allocated_bytes() / 2**20,
            "python_mb": python_bytes / 2**20,
            "held": len(held),
        }
    elif mode == "fleet":
        # n big tables and 19 * n small ones (50 + 950 = 1,000 for n = 50), summaries only
        small = open_storage(str(table_path(TINY)))
        held = [TableSummary.load(storage) for _ in range(n)]
        held += [TableSummary.load(small) for _ in range(19 * n)]
        return {
            "after_import_mb": before_rss,
            "rss_mb": _vm_rss_mb(),
            "peak_mb": _vm_hwm_mb(),
            "arrow_mb": pa.total_allocated_bytes() / 2**20,
            "held": len(held),
        }
    else:
        raise SystemExit(f"unknown mode {mode}")
    return {"after_import_mb": before_hwm, "peak_mb": _vm_hwm_mb(), "files": count}


def _run_child(mode: str, path: str, n: int = 1) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.controller_memory", "--child", mode, path, str(n)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONPATH": _pythonpath()},
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(tiny: bool = False, n: int = 5, fleet_big: int = 50) -> dict[str, Any]:
    started = time.time()
    path = str(table_path(TINY if tiny else SPEC))
    once = {
        mode: _run_child(mode, path)
        for mode in (
            "ours_snapshot",
            "ours_summary",
            "deltalake_actions",
            "ours_uris",
            "deltalake_uris",
        )
    }
    hold = {mode: _run_child(mode, path, n) for mode in ("hold_snapshots", "hold_summaries")}
    table_path(TINY)  # generated before the fleet child needs it
    fleet = _run_child("fleet", path, fleet_big)
    return {
        "files": (TINY if tiny else SPEC).active_files,
        "n": n,
        "once": once,
        "hold": hold,
        "fleet": fleet,
        "machine": _machine(),
        "wall_s": time.time() - started,
        "load": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def render(result: dict[str, Any]) -> str:
    once, hold, n, m = result["once"], result["hold"], result["n"], result["machine"]
    labels = {
        "ours_snapshot": "ours, before: full snapshot + `observe`",
        "ours_summary": "**ours, now: `TableSummary.load` + `observe_summary`**",
        "deltalake_actions": "deltalake: `DeltaTable` + `get_add_actions()`",
        "ours_uris": "ours: full snapshot + `file_uris()`",
        "deltalake_uris": "deltalake: `DeltaTable` + `file_uris()`",
    }
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, pyarrow "
        f"{m['pyarrow']}, deltalake {m['deltalake']}; measured {m['date']}; load average "
        f"{result['load']} at the end.",
        "",
        f"One load of the {result['files']:,}-file table, fresh interpreter per row "
        "(whole-process peak RSS):",
        "",
        "| work | after imports | peak | peak above imports |",
        "|---|---:|---:|---:|",
    ]
    for mode, label in labels.items():
        r = once[mode]
        lines.append(
            f"| {label} | {r['after_import_mb']:.0f} MB | {r['peak_mb']:.0f} MB "
            f"| {r['peak_mb'] - r['after_import_mb']:.0f} MB |"
        )
    lines += [
        "",
        f"{n} loads of the same table kept in one process, as a controller watching {n} such "
        "tables (RSS: whole process; Arrow and Python: what stays allocated, in process):",
        "",
        "| kept per table | RSS after imports | RSS after | peak | Arrow kept | Python kept "
        "| per table (Arrow + Python) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, label in (("hold_snapshots", "snapshot (before)"), ("hold_summaries", "summary")):
        r = hold[mode]
        per = (r["arrow_mb"] + r["python_mb"]) / n
        lines.append(
            f"| {label} | {r['after_import_mb']:.0f} MB | {r['rss_mb']:.0f} MB "
            f"| {r['peak_mb']:.0f} MB | {r['arrow_mb']:.1f} MB | {r['python_mb']:.1f} MB "
            f"| {per:.2f} MB |"
        )
    f = result["fleet"]
    big = f["held"] // 20
    lines += [
        "",
        f"A controller's table memory at scale, in one process: summaries of {f['held']:,} "
        f"tables, {big} of them {result['files']:,}-file tables and {f['held'] - big:,} of "
        f"{TINY.active_files} files: RSS {f['after_import_mb']:.0f} MB after imports, "
        f"**{f['rss_mb']:.0f} MB** after the loads (peak {f['peak_mb']:.0f} MB; "
        f"{f['arrow_mb']:.0f} MB of Arrow kept).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    else:
        count = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 5
        big = int(sys.argv[sys.argv.index("--fleet") + 1]) if "--fleet" in sys.argv else 50
        print(render(run(tiny="--tiny" in sys.argv, n=count, fleet_big=big)))
