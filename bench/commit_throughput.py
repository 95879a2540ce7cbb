"""Commit-path benchmark: small appends, sequential and contended, ours against deltalake.

Each commit appends the same tiny batch (one data file, so one ``add`` action) to a local
table: ours through ``Table.append``, delta-rs through ``write_deltalake(mode="append")`` on a
kept ``DeltaTable`` (its fastest path: no reload between writes). Rows:

Our engine runs twice: as shipped (``ours``: the commit file, its directory and each data
file are fsynced, so a commit survives power loss) and with ``fsync=false`` (``ours-nofsync``:
the durability delta-rs and Hadoop's local filesystem offer, which never fsync), so the cost of
durability and the cost of the engine can be told apart.

* ``sequential``: one process commits N times in a row;
* ``contended``: 8 processes, started together, commit N/8 times each to one table. Retries per
  commit are counted for our engine (``CommitResult.attempts - 1``); delta-rs does not report its
  retries, only give-ups (``CommitFailedError`` after its 15 retries), which the worker counts and
  then retries itself so that every planned row is written.

After every run the table is checked: versions contiguous, one commit per planned write, every
row present once ("lost commits" must be 0). Both engines run on the same machine in one
``make bench`` run; ratios are ours / deltalake, > 1 means we are faster.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.process import PeakRss, peak_cell

NAME = "commit_throughput"
ENGINES = ("ours", "ours-nofsync", "deltalake")
OURS = {"ours": {}, "ours-nofsync": {"fsync": "false"}}
PROCESSES = 8
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
REPO = Path(__file__).resolve().parents[1]


def _batch(seed: int) -> pa.Table:
    return pa.table({"id": [seed], "value": [f"v{seed}"]}, schema=SCHEMA)


def _create(engine: str, path: str) -> None:
    if engine in OURS:
        from txntable.engine.table import Table

        Table.create(path, SCHEMA, storage_options=OURS[engine])
    else:
        from deltalake import DeltaTable

        DeltaTable.create(path, schema=SCHEMA)


def _writer(engine: str, path: str) -> Any:
    """A function committing one append; returns the retries it needed (None: unknown)."""
    if engine in OURS:
        from txntable.engine.table import Table

        table = Table.open(path, OURS[engine])

        def ours(seed: int) -> tuple[int | None, int]:
            return table.append(_batch(seed)).attempts - 1, 0

        return ours
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError

    dt = DeltaTable(path)

    def theirs(seed: int) -> tuple[int | None, int]:
        give_ups = 0
        while True:
            try:
                write_deltalake(dt, _batch(seed), mode="append")
                return None, give_ups
            except CommitFailedError:
                give_ups += 1
                dt.update_incremental()

    return theirs


def _commit_many(write: Any, count: int, first_seed: int) -> dict[str, Any]:
    retries: list[int] = []
    give_ups = 0
    started = time.perf_counter()
    ends = []
    for i in range(count):
        retried, gave_up = write(first_seed + i)
        ends.append(time.perf_counter())
        give_ups += gave_up
        if retried is not None:
            retries.append(retried)
    elapsed = time.perf_counter() - started
    tenth = max(1, count // 10)
    return {
        "commits": count,
        "seconds": elapsed,
        "first_tenth_rate": tenth / (ends[tenth - 1] - started),
        "last_tenth_rate": tenth / (ends[-1] - ends[-tenth - 1]) if count > tenth else None,
        "retries": sum(retries) if retries else None,
        "give_ups": give_ups,
    }


def _verify(path: str, expected_commits: int) -> dict[str, Any]:
    """Versions contiguous 0..expected, one row per commit, read by both engines."""
    from deltalake import DeltaTable

    from txntable.engine.table import Table

    names = sorted(p.name for p in (Path(path) / "_delta_log").glob("*.json"))
    contiguous = names == [f"{v:020d}.json" for v in range(len(names))]
    ours = Table.open(path).snapshot()
    dt = DeltaTable(path)
    ids = pa.table(dt.to_pyarrow_table()).column("id").to_pylist()
    return {
        "versions_contiguous": contiguous,
        "versions": len(names),
        "lost_commits": expected_commits - (len(names) - 1),
        "rows": len(ids),
        "duplicate_rows": len(ids) - len(set(ids)),
        "engines_agree": sorted(ours.file_uris()) == sorted(dt.file_uris()),
    }


def _sequential(engine: str, count: int, workdir: str) -> dict[str, Any]:
    path = os.path.join(workdir, f"seq-{engine}")
    _create(engine, path)
    result = _commit_many(_writer(engine, path), count, 0)
    result |= _verify(path, count)
    return result


def _contended(engine: str, count: int, workdir: str, processes: int) -> dict[str, Any]:
    path = os.path.join(workdir, f"cont-{engine}")
    _create(engine, path)
    go = os.path.join(workdir, f"go-{engine}")
    per = count // processes
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "operator")]))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.commit_throughput",
                engine,
                path,
                str(per),
                str(i * per),
                go,
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"worker failed to start: {proc.communicate()[1][-2000:]}")
    started = time.perf_counter()
    Path(go).touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"worker failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.perf_counter() - started
    retries = [r["retries"] for r in results if r["retries"] is not None]
    out_result: dict[str, Any] = {
        "commits": per * processes,
        "seconds": elapsed,
        "retries": sum(retries) if retries else None,
        "give_ups": sum(r["give_ups"] for r in results),
    }
    return out_result | _verify(path, per * processes)


def run(quick: bool) -> dict[str, Any]:
    return measure(80 if quick else 1000, PROCESSES)


def measure(count: int, processes: int) -> dict[str, Any]:
    """Both scenarios for every engine: ``count`` commits each, ``processes`` contending."""
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-commit-") as workdir:
        for engine in ENGINES:
            with PeakRss(os.getpid()) as memory:  # this process: both engines run in it
                rows[f"sequential/{engine}"] = _sequential(engine, count, workdir)
            rows[f"sequential/{engine}"] |= memory.figures()
        for engine in ENGINES:
            with PeakRss(os.getpid()) as memory:  # the workers are this process's children
                rows[f"contended/{engine}"] = _contended(engine, count, workdir, processes)
            rows[f"contended/{engine}"] |= memory.figures()
    return {
        "commits": count,
        "processes": processes,
        "rows": rows,
        "machine": _machine(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _machine() -> dict[str, str]:
    import deltalake

    return {
        "python": platform.python_version(),
        "deltalake": deltalake.__version__,
        "cpus": str(os.cpu_count()),
        "platform": platform.platform(),
    }


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    lines = [
        f"{result['commits']} commits of one `add` each (a 1-row append), local disk; "
        f"contended = {result['processes']} processes on one table. "
        f"Machine: {result['machine']['cpus']} CPUs, Python {result['machine']['python']}, "
        f"deltalake {result['machine']['deltalake']}; measured {result.get('date', '?')}, "
        f"load average at the end {result.get('load', '?')} (a shared machine).",
        "",
        "| scenario | engine | commits/s | ratio to deltalake | first / last 10% commits/s "
        "| retries/commit | give-ups | lost commits | peak RSS of the process tree, MB (before) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario in ("sequential", "contended"):
        base = rows[f"{scenario}/deltalake"]
        base_rate = base["commits"] / base["seconds"]
        for engine in ENGINES:
            row = rows[f"{scenario}/{engine}"]
            rate = row["commits"] / row["seconds"]
            retries = "n/a" if row["retries"] is None else f"{row['retries'] / row['commits']:.2f}"
            ends = "n/a"
            if scenario == "sequential" and row.get("last_tenth_rate"):
                ends = f"{row['first_tenth_rate']:.1f} / {row['last_tenth_rate']:.1f}"
            lines.append(
                f"| {scenario} | {engine} | {rate:.1f} | {rate / base_rate:.2f} | {ends} "
                f"| {retries} "
                f"| {row['give_ups']} | {row['lost_commits']} | {peak_cell(row)} |"
            )
    checks = all(
        r["versions_contiguous"]
        and r["lost_commits"] == 0
        and r["duplicate_rows"] == 0
        and r["rows"] == r["commits"]
        and r["engines_agree"]
        for r in rows.values()
    )
    lines += [
        "",
        "The first/last columns show how the rate changes as the log grows (sequential runs).",
        "Retries are counted by our engine only; delta-rs reports none, just give-ups (a commit "
        "it abandoned after 15 retries; the benchmark then retries the write itself).",
        "",
        f"Every run checked afterwards (versions contiguous, one version per commit, no row "
        f"lost or duplicated): {'passed' if checks else 'FAILED'}.",
    ]
    return "\n".join(lines) + "\n"


def _worker(argv: list[str]) -> int:
    engine, path, count, first_seed, go = argv
    write = _writer(engine, path)  # load before the start signal
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while not os.path.exists(go):
        time.sleep(0.002)
    result = _commit_many(write, int(count), int(first_seed))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
