"""Whole processes as a user runs them: wall time from the outside, peak RSS from the inside.

A benchmark that times a command (``txntable checkpoint``) against the peer's equivalent script
must count what a user waits for and what a pod is sized by: the interpreter's start, the
imports, the work and the exit. The parent takes the wall time; the child reports its own
``VmHWM`` when it exits (``getrusage`` and ``wait4`` would not do: Linux carries the parent's
peak into a child across fork or vfork and exec, and the parent here is a big benchmark
process). The command runs exactly as the console script does (``txntable.cli.main.main``),
so its entry point still chooses the Arrow allocator before pyarrow loads.

``PeakRss`` is the other measure, for work done inside the benchmark's own process (and the
processes it starts, a Spark JVM and its workers): the summed resident set of a process tree,
sampled every 50 ms during one step, with what it was just before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: The child: record the peak at exit, then run the command (``cli ARGS...``) or a script
#: (``script CODE ARGS...``) as ``__main__``.
_CHILD = r"""
import atexit, os, sys

def _peak():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
        out.write(kb)

atexit.register(_peak)
kind, rest = sys.argv[1], sys.argv[2:]
if kind == "cli":
    sys.argv = ["txntable", *rest]
    from txntable.cli.main import main
    sys.exit(main())
sys.argv = ["-c", *rest[1:]]
exec(compile(rest[0], "<bench script>", "exec"), {"__name__": "__main__"})
"""


def _run(argv: list[str], env: Mapping[str, str | None] | None, timeout: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix="bench-peak-", delete=False) as peak_file:
        peak_path = peak_file.name
    child_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator")]),
        **(env or {}),
        "BENCH_PEAK_FILE": peak_path,
    }
    for name, value in list(child_env.items()):
        if value is None:  # a caller's way to remove a variable
            del child_env[name]
    try:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *argv],
            check=False,  # a failure is raised below, with the child's last words
            capture_output=True,
            text=True,
            env=child_env,
            cwd=REPO,
            timeout=timeout,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"{argv[:3]} exited {done.returncode}: {tail}")
        peak_kb = Path(peak_path).read_text().strip()
    finally:
        Path(peak_path).unlink(missing_ok=True)
    return {"process_s": wall, "peak_mb": int(peak_kb) / 1024, "stdout": done.stdout}


def run_cli(
    args: Sequence[str], env: Mapping[str, str | None] | None = None, timeout: float = 1800
) -> dict[str, Any]:
    """``txntable ARGS`` in a fresh interpreter: its wall time, peak RSS and output. ``env``
    adds variables to this process's (a value of ``None`` removes one)."""
    return _run(["cli", *args], env, timeout)


def run_script(
    code: str,
    args: Sequence[str] = (),
    env: Mapping[str, str | None] | None = None,
    timeout: float = 1800,
) -> dict[str, Any]:
    """A Python script (``code``, its ``sys.argv[1:]`` = ``args``) in a fresh interpreter."""
    return _run(["script", code, *args], env, timeout)


def status_kb(pid: int, key: str = "VmHWM") -> int:
    """A memory figure of ``/proc/PID/status`` (``VmHWM``: peak RSS; ``VmRSS``: now), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class PeakRss:
    """Samples the summed RSS of ``root``'s process tree (without ``exclude``'s) in a thread."""

    def __init__(self, root: int, exclude: int | None = None) -> None:
        self.root, self.exclude = root, exclude
        self.before_kb = self._tree_kb()
        self.peak_kb = self.before_kb
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _tree_kb(self) -> int:
        skip = set() if self.exclude is None else {self.exclude, *descendants(self.exclude)}
        pids = [self.root, *descendants(self.root)]
        return sum(status_kb(p, "VmRSS") for p in pids if p not in skip)

    def _poll(self) -> None:
        while not self._done.wait(0.05):
            self.peak_kb = max(self.peak_kb, self._tree_kb())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, self._tree_kb())

    def figures(self) -> dict[str, int]:
        return {"rss_before_mb": self.before_kb // 1024, "peak_rss_mb": self.peak_kb // 1024}


def peak_cell(figures: Mapping[str, Any] | None) -> str:
    """A table cell of ``PeakRss.figures()`` found in ``figures``: ``peak (before)`` in MB, or
    ``not measured`` (a result saved before the benchmark measured memory)."""
    if not figures or "peak_rss_mb" not in figures:
        return "not measured"
    return f"{figures['peak_rss_mb']} ({figures['rss_before_mb']})"


__all__ = ["PeakRss", "descendants", "peak_cell", "run_cli", "run_script", "status_kb"]
