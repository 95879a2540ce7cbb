"""``txntable vacuum URI``: delete data files no version inside the retention reads."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from txntable.engine.retention import parse_interval_ms
from txntable.engine.vacuum import vacuum
from txntable.jobs.storage_args import add_storage_option_argument, open_table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "vacuum",
        help="delete data files that no version inside delta.deletedFileRetentionDuration reads",
    )
    parser.add_argument("uri", help="table location (path, file://, memory://, s3://, ...)")
    parser.add_argument(
        "--retention",
        default=None,
        metavar="DURATION",
        help="keep files any version of this age reads, e.g. 'interval 7 days' "
        "(default: the table's delta.deletedFileRetentionDuration, 7 days)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a retention shorter than the table's (readers and writers may fail)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would go, delete none")
    add_storage_option_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    retention_ms = parse_interval_ms(args.retention) if args.retention else None
    snapshot = open_table(args).snapshot()
    result = vacuum(snapshot, retention_ms=retention_ms, force=args.force, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    cutoff = datetime.fromtimestamp(result.cutoff_ms / 1000, UTC).isoformat()
    verb = "would delete" if result.dry_run else "deleted"
    print(
        f"{verb} {len(result.files)} files ({result.bytes} bytes) that no version since "
        f"{cutoff} reads; {result.num_kept_referenced} referenced files kept"
    )
    for path in result.files:
        print(f"  {path}")
    return 0
