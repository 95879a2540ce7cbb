"""``txntable demo``: the README's main job on the embedded default (no cluster).

1. A partitioned table is fragmented by concurrent appenders: processes writing through our
   engine and processes writing with ``deltalake`` (delta-rs), racing for the same versions.
2. The manifests of ``examples/local`` (a TxnTable, a CompactionPolicy, a CheckpointPolicy) are
   reconciled by the controller's own loop in local mode: it observes the log, decides, launches
   OPTIMIZE as a Spark job in local mode and writes a checkpoint inline.
3. Before/after: files, average file size, rows (read back by deltalake), the runs made, and the
   commit/retry/conflict counts of every writer.

pyarrow, the engine and the controller are imported when the demo runs, not when ``txntable``
builds its parser (every command registers this one).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txntable.cli.errors import CliError
from txntable.cli.local_manifests import load_manifests, refuse
from txntable.cli.run_cmd import make_operator, reconcile_loop
from txntable.config import Config
from txntable.jobs.flags import at_least

if TYPE_CHECKING:
    import pyarrow as pa

    from txntable.api.types import TxnTable
    from txntable.controller.tick import Tick

REGIONS = ("eu", "us", "apac")
#: Written into the table directory and the run-state directory the demo creates: a later demo
#: replaces only what carries it, never a table (or folder) someone else put there.
DEMO_MARKER = ".txntable-demo"


def schema() -> pa.Schema:
    """The demo table's columns."""
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.int64()),
            ("region", pa.string()),
            ("amount", pa.float64()),
            ("note", pa.string()),
        ]
    )


def register(sub: Any) -> None:
    parser = sub.add_parser("demo", help="fragment a table with concurrent writers, then heal it")
    parser.add_argument(
        "--manifests",
        default="examples/local",
        help="local-mode manifests (default examples/local)",
    )
    parser.add_argument(
        "--writers",
        type=at_least(1, "writer"),
        default=2,
        metavar="N",
        help="appender processes per engine (default 2)",
    )
    parser.add_argument(
        "--appends",
        type=at_least(1, "append"),
        default=8,
        metavar="N",
        help="appends per writer process (default 8)",
    )
    parser.add_argument(
        "--runs-dir", default=".txntable-runs", help="local run state (default .txntable-runs)"
    )
    parser.set_defaults(run=run)


def _batch(writer: int, i: int, rows: int = 150) -> pa.Table:
    import pyarrow as pa

    base = (writer * 1000 + i) * rows
    ids = range(base, base + rows)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([REGIONS[k % len(REGIONS)] for k in ids]),
            "amount": pa.array([float(k % 97) for k in ids]),
            "note": pa.array([None if k % 10 == 0 else f"row {k}" for k in ids]),
        },
        schema=schema(),
    )


def _ours(location: str, writer: int, appends: int, out: Any) -> None:
    from txntable.engine import CommitOptions, Table
    from txntable.observability.metrics import EngineMetrics
    from txntable.observability.run_report import engine_summary

    metrics = EngineMetrics()
    table = Table.open(location)
    options = CommitOptions(table_name="default/events", observer=metrics)
    for i in range(appends):
        table.append(_batch(writer, i), options=options)
    out.put(("txntable", engine_summary(metrics)))


def _delta_rs(location: str, writer: int, appends: int, out: Any) -> None:
    from deltalake import write_deltalake

    failures = 0
    for i in range(appends):
        for _ in range(20):  # delta-rs gives up after its own retries; the demo insists
            try:
                write_deltalake(location, _batch(writer, i), mode="append")
                break
            except Exception:
                failures += 1
                time.sleep(0.05)
    out.put(("delta-rs", {"gaveUp": failures}))


def check_claimable(path: Path, what: str) -> None:
    """Refuse a path that exists and is not a previous demo's (it would carry the marker)."""
    if (path.exists() or path.is_symlink()) and not (path / DEMO_MARKER).is_file():
        raise CliError(
            f"{path} exists and was not created by txntable demo: refusing to delete or "
            f"overwrite it. Point the demo's {what} somewhere new, or remove it yourself."
        )


def claim(path: Path) -> None:
    """Make ``path`` a fresh directory of the demo's own (after ``check_claimable``)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / DEMO_MARKER).write_text("created by txntable demo; the next demo replaces it\n")


def start_deaf_to_ctrl_c(procs: list[Any]) -> None:
    """Start ``procs`` (spawned processes) with SIGINT blocked, a mask they keep for life: a
    terminal's Ctrl-C goes to the whole process group, and a writer still importing when it
    came printed its own ``KeyboardInterrupt`` traceback. The parent handles Ctrl-C (one
    ``error: interrupted``) and stops them; one that arrived while they started is delivered
    to it when the mask is restored."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for p in procs:
            p.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def fragment(location: Path, writers: int, appends: int) -> dict[str, Any]:
    """Create the table, then race ``writers`` processes per engine appending to it."""
    import multiprocessing

    from txntable.engine import Table

    Table.create(str(location), schema(), partition_by=["region"])
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(str(location), w + offset, appends, queue))
        for offset, target in ((0, _ours), (100, _delta_rs))
        for w in range(writers)
    ]
    try:
        start_deaf_to_ctrl_c(procs)
        reports = [queue.get(timeout=600) for _ in procs]  # every writer reported: all rows
    except BaseException:  # Ctrl-C: the writers are stopped here (one line, no traceback each)
        for p in procs:
            if p.pid is not None:
                p.terminate()
                p.join()
        raise
    for p in procs:
        p.join()
        # deltalake may abort the interpreter at exit (SIGABRT) after its work is done and
        # reported; any other non-zero exit is a failure
        if p.exitcode not in (0, -signal.SIGABRT):
            raise CliError(f"a demo writer failed (exit code {p.exitcode})")
    ours = [r for kind, r in reports if kind == "txntable"]
    return {
        "txntable": {key: sum(r.get(key, 0) for r in ours) for key in ("attempts", "retries")}
        | {"conflicts": sum(sum(r.get("conflicts", {}).values()) for r in ours)},
        "delta-rs gave up and re-tried": sum(
            r["gaveUp"] for kind, r in reports if kind != "txntable"
        ),
    }


_COUNT_ROWS = (
    "import sys, deltalake\n"
    "print(deltalake.DeltaTable(sys.argv[1]).to_pyarrow_table().num_rows, flush=True)\n"
)


def _rows_read_by_deltalake(location: Path) -> int:
    """Rows as deltalake reads them, in a child process: deltalake can abort the interpreter at
    exit after a read ("terminate called without an active exception"), which must never turn a
    finished demo into exit 134. The count printed before such an abort is still the answer."""
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_ROWS, str(location)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if not lines or not lines[-1].isdigit():
        raise CliError(f"deltalake could not read {location}: {done.stderr.strip()[-300:]}")
    return int(lines[-1])


def _describe(location: Path, label: str) -> dict[str, Any]:
    from txntable.engine import Table

    snap = Table.open(str(location)).snapshot()
    rows = _rows_read_by_deltalake(location)
    files = snap.num_files
    avg = snap.size_bytes / files if files else 0
    print(
        f"{label:<7} version {snap.version:>3}  files {files:>4}  average file "
        f"{avg / 1024:8.1f} KiB  rows {rows} (read back by deltalake)"
    )
    return {"version": snap.version, "files": files, "rows": rows}


def _log_contention(location: Path) -> dict[str, dict[str, int]]:
    from txntable.engine import Table
    from txntable.observability.log_commits import classify

    out: dict[str, dict[str, int]] = {}
    for info in Table.open(str(location)).history():
        commit = classify(info)
        if commit is None:
            continue
        row = out.setdefault(commit.engine, {"commits": 0, "retried": 0, "lostAttempts": 0})
        row["commits"] += 1
        row["retried"] += commit.outcome == "retried"
        row["lostAttempts"] += commit.lost_attempts
    return out


def _require_deltalake() -> None:
    """The demo races deltalake writers against ours and reads back with it: without the
    ``demo`` extra it would fail inside a child process with a traceback."""
    import importlib.util

    if importlib.util.find_spec("deltalake") is None:
        raise CliError(
            "txntable demo needs deltalake (the competing writer and the independent reader): "
            "pip install 'txntable[demo]'"
        )


def run(args: argparse.Namespace) -> int:
    from txntable.launch import LocalLauncher

    _require_deltalake()
    manifests = load_manifests(Path(args.manifests))
    if manifests.errors:
        refuse(manifests, args.manifests)
    if len(manifests.tables) != 1:
        raise CliError(
            f"{args.manifests} must hold exactly one TxnTable, not {len(manifests.tables)}"
        )
    table: TxnTable = manifests.tables[0]
    location = Path(table.spec.location).resolve()
    runs_dir = Path(args.runs_dir)
    check_claimable(location, "TxnTable location (in the manifests)")
    check_claimable(runs_dir, "--runs-dir")
    claim(location)
    claim(runs_dir)
    print(f"1. fragmenting {location}: {args.writers} txntable + {args.writers} deltalake writers")
    started = time.monotonic()
    contention = fragment(location, args.writers, args.appends)
    print(f"   done in {time.monotonic() - started:.1f}s")
    before = _describe(location, "before")
    print(f"2. the controller loop in local mode over {args.manifests} (Spark local mode)")
    launcher = LocalLauncher(runs_dir)
    operator = make_operator(runs_dir, Config.from_env(), launcher)

    def show(resource: TxnTable, tick: Tick) -> None:
        for event in tick.events:
            print(f"   {event.reason}: {event.message}", flush=True)

    started = time.monotonic()
    try:
        final = reconcile_loop(manifests, operator, once=True, interval=2.0, on_tick=show)[0]
    except KeyboardInterrupt as exc:  # what the demo started, it stops
        stopped = launcher.stop_started()
        if stopped:
            raise type(exc)(f"stopped the run(s) it had started: {', '.join(stopped)}") from None
        raise
    print(f"   converged in {time.monotonic() - started:.1f}s")
    after = _describe(location, "after")
    status = final.status
    print("3. result")
    for record, what in (
        (status.last_compaction, "compaction"),
        (status.last_checkpoint, "checkpoint"),
    ):
        if record is not None:
            print(f"   {what:<10} {record.run_name}: {record.outcome} {record.message or ''}")
    print(f"   phase {status.phase}, {status.commits_since_checkpoint} commits since checkpoint")
    print(f"   our writers (engine metrics): {contention['txntable']}")
    repeated = contention["delta-rs gave up and re-tried"]
    print(f"   delta-rs write calls that failed and were repeated: {repeated}")
    for engine, row in sorted(_log_contention(location).items()):
        print(f"   log, {engine:<8}: {row}")
    if after["rows"] != before["rows"]:
        raise CliError(f"rows changed: {before['rows']} before, {after['rows']} after")
    if after["files"] >= before["files"]:
        raise CliError("the table was not compacted")
    print(f"healed: {before['files']} files -> {after['files']}, rows unchanged ({after['rows']})")
    return 0
