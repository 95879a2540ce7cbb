"""Start-up benchmark: what a process pays before any work, ours against deltalake.

Every job the controller launches and every ``txntable`` command starts a fresh interpreter, so
the cost of importing the package and building the command line is paid on every run. Each row
is a whole process (interpreter start, imports, argument parsing, the command itself) started
fresh; its CPU time (user + system) and peak RSS come from GNU time's accounting of that one
child, so nothing of this process is counted, and its wall time is timed around it. On a loaded
machine the wall time stretches with the load; CPU time and peak RSS barely move. Repetitions
alternate the rows so that disk cache and CPU frequency treat them alike; the median of the
repetitions is reported.

Bytecode is compiled once, in the untimed warm-up, as in the image (its ``pip install`` compiles
every module; it runs with ``PYTHONDONTWRITEBYTECODE=1``, so nothing is written later). The dev
venv has an editable install and the same variable, so there every process would compile
txntable's sources again (~0.1 s for ``inspect``) while deltalake's come compiled: the children
here write their bytecode under a private ``PYTHONPYCACHEPREFIX`` instead.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "startup"

#: GNU time: reports the peak RSS of the one process it starts
_TIME = "/usr/bin/time"

#: deltalake's nearest to ``txntable inspect``: open the table, list its files and schema
_INSPECT_DELTALAKE = (
    "import sys, deltalake\n"
    "t = deltalake.DeltaTable(sys.argv[1])\n"
    "print(t.version(), len(t.file_uris()), t.schema())\n"
)


def _txntable_command() -> list[str]:
    """The installed console script next to this interpreter, else the module it runs."""
    script = Path(sys.executable).parent / "txntable"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "txntable.cli.main"]


def _small_table(directory: Path) -> str:
    """A two-file partitioned table written by our engine (what ``inspect`` reads)."""
    import pyarrow as pa

    from txntable.engine.table import Table

    location = str(directory / "small")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    table = Table.create(location, data.schema, partition_by=["p"])
    table.append(data)
    table.append(data)
    return location


def cases(table: str) -> dict[str, list[str]]:
    py = sys.executable
    cli = _txntable_command()
    return {
        "python (interpreter only)": [py, "-c", "pass"],
        "import deltalake": [py, "-c", "import deltalake"],
        "import txntable": [py, "-c", "import txntable"],
        "txntable --version": [*cli, "--version"],
        "txntable --help": [*cli, "--help"],
        "txntable inspect --help": [*cli, "inspect", "--help"],
        "txntable inspect TABLE": [*cli, "inspect", table],
        "deltalake: open TABLE, list files": [py, "-c", _INSPECT_DELTALAKE, table],
        "python -m txntable.jobs.optimize --help": [py, "-m", "txntable.jobs.optimize", "--help"],
        # how a compaction run starts (Arrow executor): the job's imports, the log, the plan
        "python -m txntable.jobs.optimize TABLE --executor arrow --dry-run": [
            py,
            "-m",
            "txntable.jobs.optimize",
            table,
            "--executor",
            "arrow",
            "--dry-run",
        ],
        "python -m txntable.jobs.checkpoint --help": [
            py,
            "-m",
            "txntable.jobs.checkpoint",
            "--help",
        ],
    }


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Wall and CPU (user + system) seconds and peak RSS (MB) of one fresh process running
    ``argv``.

    The peak comes from ``/usr/bin/time``, a small C program that forks the command: a child
    forked from this (big) interpreter would inherit its peak RSS through ``fork``/``exec``.
    """
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as out:
        started = time.perf_counter()
        done = subprocess.run(
            [_TIME, "-f", "%U %S %M", "-o", out.name, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - started
        user, system, peak_kb = out.read().strip().splitlines()[-1].split()
    # deltalake may abort the interpreter at exit after its work is done (SIGABRT: 134)
    if done.returncode not in (0, 134):
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return {"wall_s": wall, "cpu_s": float(user) + float(system), "peak_mb": int(peak_kb) / 1024}


def child_env(pycache: Path) -> dict[str, str]:
    """This environment with bytecode written under ``pycache`` (and read from there)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def run(quick: bool) -> dict[str, Any]:
    if not Path(_TIME).exists():
        raise SystemExit(f"error: the startup benchmark needs GNU time at {_TIME}")
    reps = 3 if quick else 5
    directory = Path(tempfile.mkdtemp(prefix="txntable-startup-"))
    try:
        commands = cases(_small_table(directory))
        env = child_env(directory / "pycache")
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
        for argv in commands.values():  # warm the disk cache and compile, untimed
            measure(argv, env)
        load_before = os.getloadavg()
        for _ in range(reps):
            for name, argv in commands.items():
                samples[name].append(measure(argv, env))
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "samples": samples,
        "load": [max(a, b) for a, b in zip(load_before, load_after, strict=True)],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def render(result: dict[str, Any]) -> str:
    import deltalake

    samples = result["samples"]
    medians = {
        name: {k: statistics.median(x[k] for x in rows) for k in ("wall_s", "cpu_s", "peak_mb")}
        for name, rows in samples.items()
    }
    base = medians["import deltalake"]
    lines = [
        f"Whole processes, each started fresh; median of {len(next(iter(samples.values())))}. "
        f"Machine: {result['cpus']} CPUs, Python {result['python']}, deltalake "
        f"{deltalake.__version__}; measured {result['measured']}, load average "
        f"{' '.join(f'{x:.1f}' for x in result['load'])} (other jobs running). TABLE is a "
        "two-commit partitioned table of two files. Under load, read CPU rather than wall.",
        "",
        "| process | wall | CPU (user + sys) | CPU vs import deltalake | peak RSS "
        "| RSS vs import deltalake |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, m in medians.items():
        lines.append(
            f"| `{name}` | {m['wall_s']:.3f} s | {m['cpu_s']:.2f} s | "
            f"{m['cpu_s'] / base['cpu_s']:.2f}x | "
            f"{m['peak_mb']:.0f} MB | {m['peak_mb'] / base['peak_mb']:.2f}x |"
        )
    return "\n".join(lines)
