"""``txntable demo``: the README's main job on the embedded default (no cluster).

It builds a small partitioned table fragmented by many small appends, written by ``deltalake``
(the independent Delta engine), then shows it through our engine, so a newcomer sees in one
command that txntable reads another engine's table exactly. Later maintenance steps (OPTIMIZE,
checkpoints, the local controller loop) join this command as they land.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from txntable.cli.errors import CliError
from txntable.cli.inspect_cmd import describe, summary
from txntable.engine import Table

REGIONS = ("eu", "us", "apac")


def register(sub: Any) -> None:
    parser = sub.add_parser("demo", help="build a fragmented demo table and show it")
    parser.add_argument(
        "--dir", default="demo-tables", help="where to put demo tables (default ./demo-tables)"
    )
    parser.add_argument("--appends", type=int, default=24, help="small appends to make")
    parser.set_defaults(run=run)


def _batch(i: int, rows: int = 200) -> pa.Table:
    base = i * rows
    return pa.table(
        {
            "id": pa.array(range(base, base + rows), pa.int64()),
            "region": pa.array([REGIONS[(base + k) % len(REGIONS)] for k in range(rows)]),
            "amount": pa.array([float((base + k) % 97) for k in range(rows)]),
            "note": pa.array([None if k % 10 == 0 else f"row {base + k}" for k in range(rows)]),
        }
    )


def run(args: argparse.Namespace) -> int:
    try:
        from deltalake import write_deltalake
    except ImportError as exc:  # pragma: no cover - dev extra is installed by make demo
        raise CliError("the demo needs the 'deltalake' package (pip install -e '.[dev]')") from exc
    root = Path(args.dir).resolve() / "events"
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for i in range(args.appends):
        write_deltalake(str(root), _batch(i), mode="append", partition_by=["region"])
    elapsed = time.monotonic() - started
    print(f"deltalake wrote {args.appends} small appends to {root} in {elapsed:.1f}s")
    print()
    table = Table.open(str(root))
    snapshot = table.snapshot()
    print(summary(describe(snapshot), max_files=6))
    first = table.snapshot(version=0)
    print()
    print(
        f"time travel: version 0 had {first.num_files} files; "
        f"version {snapshot.version} has {snapshot.num_files}"
    )
    history = table.history(limit=3)
    print("latest commits: " + ", ".join(f"v{h['version']} {h.get('operation')}" for h in history))
    return 0
