"""A/B runner: the same benchmarks on two checkouts, interleaved, so "within noise" can be checked.

``make bench`` records one run of one commit; on this shared 2-core machine the load changes by
several times within minutes, so two commits' figures taken at different moments cannot show
whether a change made something slower. This runner takes two checkouts, each with its own
``.venv`` (an editable install of that checkout), and runs every chosen benchmark module in both,
each run a fresh process started from that checkout (its own ``bench/`` and ``txntable``), in the
order A B, B A, A B, ... so load drift hits both sides alike. It keeps every number each
module's ``run(quick)`` returns and prints, per figure, the median of each side, B/A and the
spread (min-max) of each side, plus the load average before every run.

``python -m bench.ab A_DIR B_DIR [--rounds N] [--json PATH] MODULE[:quick|:full] ...``
(``make bench-ab A=... B=...``). A module missing from one checkout is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Runs one module's ``run(quick)`` in the checkout's interpreter and prints its result as the
#: last line after MARKER; it is passed with ``-c`` because the older checkout lacks this file.
MARKER = "AB-RESULT "
CHILD = (
    "import importlib, json, sys\n"
    "name, quick = sys.argv[1], sys.argv[2] == 'quick'\n"
    "result = importlib.import_module(name).run(quick)\n"
    f"print({MARKER!r} + json.dumps(result, default=str), flush=True)\n"
)
#: The controller and engine benchmarks issue 24's restructuring touched, with their sizes.
DEFAULT_MODULES = (
    "bench.read_snapshot:full",
    "bench.controller_memory:full",
    "bench.optimize:quick",
    "bench.checkpoint:quick",
    "bench.scale:quick",
    "bench.commit_events:quick",
    "bench.status_writes:full",
)


@dataclass
class Run:
    side: str
    module: str
    round: int
    load: tuple[float, float, float]
    wall_s: float
    figures: dict[str, float] = field(default_factory=dict)
    error: str = ""


#: Result keys that describe the machine or the benchmark's input, not the code: not figures
#: (nor is any key starting with ``load``: the load average, which the summary shows apart).
NOT_FIGURES = frozenset({"machine", "spec", "specs"})


def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a nested result, keyed by its path (``rows.0.seconds``); booleans and
    strings are left out (they are labels or checks, not figures), and so is ``NOT_FIGURES``."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [
            (str(k), v)
            for k, v in value.items()
            if k not in NOT_FIGURES and not str(k).startswith("load")
        ]
    elif isinstance(value, list | tuple):
        items = [(str(i), v) for i, v in enumerate(value)]
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return {prefix: float(value)}
    else:
        return {}
    for key, item in items:
        out.update(flatten(item, f"{prefix}.{key}" if prefix else key))
    return out


def _is_figure(path: str) -> bool:
    """False for a path ``flatten`` leaves out now (runs saved by an older runner keep them)."""
    return not any(p in NOT_FIGURES or p.startswith("load") for p in path.split("."))


def has_module(checkout: Path, module: str) -> bool:
    return (checkout / Path(*module.split("."))).with_suffix(".py").is_file()


def run_once(
    checkout: Path, module: str, quick: bool, timeout: float
) -> tuple[dict[str, Any], str]:
    """One fresh process of ``checkout``'s interpreter running ``module``; (result, error)."""
    python = checkout / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'operator'}"}
    argv = [str(python), "-c", CHILD, module, "quick" if quick else "full"]
    # own process group: a timeout or Ctrl-C ends the benchmark's children too
    proc = subprocess.Popen(
        argv, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    memory = _tree_sampler(proc.pid)
    try:
        with memory:
            stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        return {}, f"exit {proc.returncode}: {tail}"
    result: dict[str, Any] = json.loads(lines[-1][len(MARKER) :])
    # memory is compared like every other figure: the child's whole process tree at its peak
    result["process_tree_peak_mb"] = memory.figures()["peak_rss_mb"]
    return result, ""


def _tree_sampler(pid: int) -> Any:
    """A sampler of the child's process tree (``bench.process.PeakRss``, this checkout's)."""
    from bench.process import PeakRss

    return PeakRss(pid)


def parse_module(spec: str, default_quick: bool) -> tuple[str, bool]:
    name, _, size = spec.partition(":")
    if size not in ("", "quick", "full"):
        raise SystemExit(f"error: size of {spec!r} must be quick or full")
    return name, (size == "quick") if size else default_quick


def measure(
    sides: dict[str, Path],
    modules: list[tuple[str, bool]],
    rounds: int,
    timeout: float,
    json_path: Path | None = None,
) -> list[Run]:
    """``rounds`` rounds; in each, every module runs on both sides back to back, A first in
    even rounds and B first in odd ones (A B B A ...)."""
    runs: list[Run] = []
    for module, _ in modules:
        missing = [s for s, path in sides.items() if not has_module(path, module)]
        if missing:
            print(f"skip {module}: not in {', '.join(missing)}", file=sys.stderr, flush=True)
    present = [(m, q) for m, q in modules if all(has_module(p, m) for p in sides.values())]
    order = list(sides)
    for r in range(rounds):
        for module, quick in present:
            for side in order if r % 2 == 0 else order[::-1]:
                load = os.getloadavg()
                started = time.monotonic()
                result, error = run_once(sides[side], module, quick, timeout)
                wall = time.monotonic() - started
                run = Run(side, module, r, load, wall, flatten(result), error)
                runs.append(run)
                if json_path is not None:  # after every run: a cut-short run keeps its figures
                    save(json_path, sides, modules, runs)
                status = error or f"{len(run.figures)} figures"
                print(
                    f"round {r + 1}/{rounds} {module} {side}: {wall:.0f} s, load {load[0]:.1f}"
                    f" before; {status}",
                    file=sys.stderr,
                    flush=True,
                )
    return runs


def save(
    path: Path, sides: dict[str, Path], modules: list[tuple[str, bool]], runs: list[Run]
) -> None:
    raw = {
        "sides": {k: str(v) for k, v in sides.items()},
        "modules": [f"{m}:{'quick' if q else 'full'}" for m, q in modules],
        "runs": [r.__dict__ for r in runs],
    }
    path.write_text(json.dumps(raw, indent=1) + "\n")


def load(path: Path) -> tuple[dict[str, Path], list[tuple[str, bool]], list[Run]]:
    raw = json.loads(path.read_text())
    sides = {k: Path(v) for k, v in raw["sides"].items()}
    modules = [parse_module(m, False) for m in raw["modules"]]
    runs = [Run(**{**r, "load": tuple(r["load"])}) for r in raw["runs"]]
    return sides, modules, runs


def _fmt(x: float) -> str:
    if x == 0 or 0.01 <= abs(x) < 1e6:
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return f"{x:.2e}"


def report(
    runs: list[Run],
    sides: dict[str, Path],
    modules: list[tuple[str, bool]],
    figures: re.Pattern[str] | None = None,
) -> str:
    """The Markdown summary: per module, each figure's medians, B/A and both spreads
    (only the figures whose path ``figures`` matches, when given)."""
    a, b = list(sides)
    lines = [f"A = {sides[a]}, B = {sides[b]}", ""]
    for module, quick in modules:
        mine = [r for r in runs if r.module == module]
        if not mine:
            lines += [f"### {module}: skipped (missing on a side)", ""]
            continue
        per = {s: [r for r in mine if r.side == s and not r.error] for s in (a, b)}
        loads = {s: [r.load[0] for r in mine if r.side == s] for s in (a, b)}
        lines += [
            f"### {module} ({'quick' if quick else 'full'} sizes)",
            "",
            f"runs ok: A {len(per[a])}, B {len(per[b])}; 1-min load before each run: "
            + "; ".join(f"{s} " + " ".join(f"{x:.1f}" for x in loads[s]) for s in (a, b)),
        ]
        lines += [f"- failed: {r.side} round {r.round + 1}: {r.error}" for r in mine if r.error]
        for s in (a, b):
            for r in per[s]:
                r.figures["process_wall_s"] = r.wall_s
        keys = sorted({k for s in (a, b) for r in per[s] for k in r.figures})
        keys = [k for k in keys if _is_figure(k) and (figures is None or figures.search(k))]
        same, rows = [], []
        for key in keys:
            va = [r.figures[key] for r in per[a] if key in r.figures]
            vb = [r.figures[key] for r in per[b] if key in r.figures]
            if not va or not vb:
                rows.append(f"| {key} | {_vals(va)} | {_vals(vb)} | | | | |")
                continue
            if len(set(va) | set(vb)) == 1:
                same.append(f"{key}={_fmt(va[0])}")
                continue
            ma, mb = statistics.median(va), statistics.median(vb)
            ratio = f"{mb / ma:.2f}" if ma else ""
            overlap = "yes" if max(min(va), min(vb)) <= min(max(va), max(vb)) else "**no**"
            rows.append(
                f"| {key} | {_fmt(ma)} | {_fmt(mb)} | {ratio} | {_fmt(min(va))}-{_fmt(max(va))} "
                f"| {_fmt(min(vb))}-{_fmt(max(vb))} | {overlap} |"
            )
        lines += [
            "",
            "| figure | A median | B median | B/A | A min-max | B min-max | ranges overlap |",
            "|---|---:|---:|---:|---:|---:|:-:|",
            *rows,
            "",
        ]
        if same:
            lines += ["Identical in every run of both sides: " + ", ".join(same) + ".", ""]
    return "\n".join(lines)


def _vals(values: list[float]) -> str:
    return " ".join(_fmt(v) for v in values) or "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("a", type=Path, nargs="?", help="checkout A (the baseline), with .venv")
    parser.add_argument("b", type=Path, nargs="?", help="checkout B, with its .venv")
    parser.add_argument("modules", nargs="*", help="MODULE[:quick|:full] (default: issue 24's)")
    parser.add_argument("--rounds", type=int, default=4, help="runs per side and module")
    parser.add_argument("--quick", action="store_true", help="size of modules given without one")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--json", type=Path, help="write every run's figures here, as they come")
    parser.add_argument("--report", type=Path, help="only print the summary of a --json file")
    parser.add_argument("--figures", type=re.compile, help="show only figures matching this regex")
    args = parser.parse_intermixed_args(argv)  # options may come between the positionals
    if args.report:
        sides, modules, runs = load(args.report)
        print(report(runs, sides, modules, args.figures))
        return 0
    if args.a is None or args.b is None:
        parser.error("two checkouts are needed")
    sides = {"A": args.a.resolve(), "B": args.b.resolve()}
    for side, path in sides.items():
        if not (path / ".venv" / "bin" / "python").exists():
            raise SystemExit(f"error: checkout {side} ({path}) has no .venv: run make setup there")
    modules = [parse_module(m, args.quick) for m in args.modules or DEFAULT_MODULES]
    started = time.time()
    runs = measure(sides, modules, args.rounds, args.timeout, args.json)
    print(report(runs, sides, modules, args.figures))
    print(f"{args.rounds} rounds, {(time.time() - started) / 60:.0f} min in all.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
