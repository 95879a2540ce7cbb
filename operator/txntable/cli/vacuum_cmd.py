"""``txntable vacuum URI``: delete data files no version inside the retention reads.

In this process by default; ``--executor spark`` lists the table's top-level directories and
deletes in chunks as Spark tasks (``maintenance/vacuum_spark.py``, ``local[*]`` unless
``--master``), for tables whose listing is too big for one process. Both decide alike.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from txntable import interrupts
from txntable.cli.errors import CliError
from txntable.cli.optimize_cmd import iceberg_lines
from txntable.jobs.flags import duration_ms, spark_master
from txntable.jobs.storage_args import add_storage_option_argument, open_table, storage_options

if TYPE_CHECKING:  # imported when the command runs: building the parser must stay cheap
    from txntable.engine import Snapshot, VacuumResult


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "vacuum",
        help="delete data files that no version inside delta.deletedFileRetentionDuration reads",
    )
    parser.add_argument("uri", help="table location (path, file://, memory://, s3://, ...)")
    parser.add_argument(
        "--retention",
        type=duration_ms,
        default=None,
        metavar="DURATION",
        help="keep files any version of this age reads, e.g. 7d, '7 days' or 'interval 7 days' "
        "(default: the table's delta.deletedFileRetentionDuration, 7 days)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a retention shorter than the table's (readers and writers may fail; "
        "default: refuse it)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would go, delete none")
    parser.add_argument(
        "--executor",
        choices=("process", "spark"),
        default="process",
        help="list and delete in this process (default) or as Spark tasks, one listing per "
        "top-level directory (for tables of millions of files)",
    )
    parser.add_argument(
        "--master",
        type=spark_master,
        default="local[*]",
        help="Spark master with --executor spark (default local[*])",
    )
    add_storage_option_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from txntable.engine import RetentionTooShortError
    from txntable.maintenance.errors import MaintenanceError, SparkStartError

    snapshot = open_table(args).snapshot()
    try:
        result = _vacuum(args, snapshot, args.retention)
    except RetentionTooShortError as exc:
        print(
            f"error: {exc}; pass --force to delete them anyway, only when nothing else reads or "
            "writes the table",
            file=sys.stderr,
        )
        return 1
    except SparkStartError as exc:
        if exc.bad_argument:  # a --master Spark cannot parse: bad usage
            raise CliError(str(exc)) from None
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MaintenanceError as exc:
        interrupts.reraise(exc)  # Ctrl-C that py4j turned into a failed Spark job
        print(f"error: {exc}", file=sys.stderr)
        return 1
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
    for line in iceberg_lines(result.to_json().get("iceberg")):
        print(line.removeprefix("vacuum: "))
    return 0


def _vacuum(args: argparse.Namespace, snapshot: Snapshot, retention_ms: int | None) -> VacuumResult:
    from txntable.engine import vacuum_table as vacuum
    from txntable.maintenance.vacuum_spark import SparkSweeper

    if args.executor != "spark":
        return vacuum(snapshot, retention_ms=retention_ms, force=args.force, dry_run=args.dry_run)
    sweeper = SparkSweeper(master=args.master, storage_options=storage_options(args.storage_option))
    try:
        return vacuum(
            snapshot,
            retention_ms=retention_ms,
            force=args.force,
            dry_run=args.dry_run,
            sweeper=sweeper,
        )
    finally:
        sweeper.close()
