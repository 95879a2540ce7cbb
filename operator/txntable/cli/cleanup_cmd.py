"""``txntable cleanup URI``: delete expired log files (or list them with ``--dry-run``)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from txntable.jobs.flags import duration_ms
from txntable.jobs.storage_args import add_storage_option_argument, open_table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "cleanup",
        help="delete commits and checkpoints older than delta.logRetentionDuration",
    )
    parser.add_argument("uri", help="table location (path, file://, memory://, s3://, ...)")
    parser.add_argument("--dry-run", action="store_true", help="list, do not delete")
    parser.add_argument(
        "--retention",
        type=duration_ms,
        default=None,
        metavar="DURATION",
        help="keep log files this long, e.g. 30d or '30 days' (default: the table's "
        "delta.logRetentionDuration, 30 days)",
    )
    add_storage_option_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from txntable.engine import cleanup_expired_logs

    snapshot = open_table(args).snapshot()
    result = cleanup_expired_logs(snapshot, dry_run=args.dry_run, retention_ms=args.retention)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    cutoff = datetime.fromtimestamp(result.cutoff_ms / 1000, UTC).isoformat()
    if result.skipped:
        print(f"cleanup skipped: {result.skipped}")
    elif result.checkpoint_version is None:
        print(f"nothing to delete: no complete checkpoint older than {cutoff}")
    else:
        verb = "would delete" if result.dry_run else "deleted"
        print(
            f"{verb} {len(result.deleted)} files below checkpoint "
            f"{result.checkpoint_version} (cutoff {cutoff})"
        )
        for path in result.deleted:
            print(f"  {path}")
    return 0
