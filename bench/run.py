"""Entry point of ``make bench``: run the registered benchmarks, refresh docs/benchmarks.md.

A benchmark is a module listed in ``MODULES`` exposing ``NAME``, ``run(quick: bool) -> dict`` and
``render(result) -> str`` (Markdown). A full run rewrites only the benchmark's own section of
``docs/benchmarks.md``, between ``<!-- bench:NAME:begin -->`` and ``<!-- bench:NAME:end -->``
(appended when missing), so hand-written prose around the figures survives. ``--quick`` runs small
sizes and only prints: quick figures must never replace the recorded ones.

Usage: ``python -m bench.run [--only NAME] [--quick] [--doc PATH]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from bench.process import PeakRss

#: Benchmark modules, in run order. Add yours here.
MODULES = [
    "bench.read_snapshot",
    "bench.controller_memory",
    "bench.optimize",
    "bench.commit_throughput",
    "bench.checkpoint",
    "bench.vacuum",
    "bench.startup",
    "bench.scale",
    "bench.hot_partitions",
    "bench.task_memory",
    "bench.commit_events",
    "bench.status_writes",
    "bench.deltaspark",
    "bench.spark_cluster",
]

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def load_modules(only: str | None = None) -> list[ModuleType]:
    modules = [importlib.import_module(name) for name in MODULES]
    if only is None:
        return modules
    chosen = [m for m in modules if only in (m.NAME, m.__name__)]
    if not chosen:
        names = ", ".join(m.NAME for m in modules)
        raise SystemExit(f"error: no benchmark named {only!r} (known: {names})")
    return chosen


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the generated section of benchmark ``name`` set to ``body``."""
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return text.rstrip("\n") + f"\n\n## {name}\n\n{block}\n"


def tree_line(memory: PeakRss) -> str:
    """The memory line under every benchmark's figures: the most its whole process tree (this
    process, the children and JVMs it started) held at once during the run, sampled every 50 ms.
    A coarse bound, beside the per-case memory columns the benchmarks give themselves."""
    return (
        f"\n\nPeak RSS of the benchmark's process tree during the run (all its processes at "
        f"once, sampled every 50 ms): {memory.figures()['peak_rss_mb']:,} MB.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--only", help="run only this benchmark (its NAME)")
    parser.add_argument("--quick", action="store_true", help="small sizes; print, do not record")
    parser.add_argument("--doc", type=Path, default=DOC, help="Markdown file to update")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    results = {}
    for module in load_modules(args.only):
        print(f"== {module.NAME}{' (quick)' if args.quick else ''}", flush=True)
        with PeakRss(os.getpid()) as memory:
            result = module.run(args.quick)
        results[module.NAME] = result
        markdown = module.render(result) + tree_line(memory)
        if isinstance(result, dict):
            result["process_tree_peak_mb"] = memory.figures()["peak_rss_mb"]
        print(markdown, flush=True)
        if not args.quick:
            text = args.doc.read_text() if args.doc.exists() else "# Benchmarks\n"
            args.doc.write_text(replace_section(text, module.NAME, markdown))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
