"""``txntable checkpoint URI``: write a checkpoint of the table now (latest or ``--version``)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from txntable.jobs.flags import at_least
from txntable.jobs.storage_args import add_storage_option_argument, open_table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "checkpoint", help="write a Delta checkpoint (classic, or multi-part with --part-size)"
    )
    parser.add_argument("uri", help="table location (path, file://, memory://, s3://, ...)")
    parser.add_argument(
        "--version",
        type=at_least(0),
        default=None,
        metavar="N",
        help="checkpoint this version (default: the newest)",
    )
    parser.add_argument(
        "--part-size",
        type=at_least(1, "action"),
        default=None,
        metavar="N",
        help="write a multi-part checkpoint with about this many file actions per part "
        "(default: one file)",
    )
    add_storage_option_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from txntable.engine import Snapshot, write_checkpoint

    started = time.perf_counter()
    # the checkpoint holds every statistic: read them with the rest, in one pass
    snapshot = Snapshot.load(open_table(args).storage, args.version, stats=True)
    result = write_checkpoint(snapshot, part_size=args.part_size)
    doc: dict[str, Any] = {
        "version": result.version,
        "parts": result.parts,
        "sizeInBytes": result.size_in_bytes,
        "numOfAddFiles": result.num_of_add_files,
        "size": result.size,
        "files": list(result.files),
        "hintWritten": result.hint_written,
        "existing": result.existing,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.json:
        print(json.dumps(doc))
    else:
        kind = f"{result.parts} parts" if result.parts else "single file"
        there = " (already there: kept)" if result.existing else ""
        print(
            f"checkpoint at version {result.version}{there}: {result.num_of_add_files} files, "
            f"{result.size} actions, {result.size_in_bytes} bytes ({kind}) "
            f"in {doc['seconds']:.2f}s"
        )
    return 0
