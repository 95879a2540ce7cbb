"""``python -m txntable.jobs.checkpoint URI``: a checkpoint whose state Spark reconstructs.

For logs too large to replay in one process: Spark tasks read the newest checkpoint (Parquet
parts, V2 top-level files and their sidecars) and the JSON commits after it through the engine's
storage, as OPTIMIZE and VACUUM tasks do, so local, S3 and Azure tables work on any cluster
without Hadoop's object-store connectors (docs/adr/0008-log-replay-in-tasks.md). The newest
action per ``(path, deletion-vector id)`` is kept in hash-partitioned tasks
(``maintenance/replay_spark.py``); the reconciled ``add``/``remove`` rows come back as Arrow and
go through the engine's own checkpoint writer, so the output (content, part layout, crash
safety, ``_last_checkpoint``) is exactly what the inline writer produces for the same version.

With ``--cleanup`` the expired log files are deleted afterwards (``engine/checkpoint/cleanup.py``).
Storage options come from ``TXNTABLE_STORAGE_OPTIONS`` (JSON, set by the launchers) and
``--storage-option KEY=VALUE``. Prints one JSON result line whatever happens once its flags are
read; exit status 0 on success, 1 when Spark could not start or anything failed once the replay
began, 2 when refused before it (a bad flag, which is one usage line and no result line; bad
input, a log that cannot be listed; nothing written), 130/143 when SIGINT/SIGTERM stopped it
(its Spark processes with it); on failure the line carries ``error`` (and ``errorType`` for a
refusal) and stderr ends with ``error: ...`` (``jobs/outcome.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import CheckpointResult, write_checkpoint_state
from txntable.engine.read.segment import LogSegment, build_segment
from txntable.engine.read.state import TableState
from txntable.engine.storage.base import Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table
from txntable.jobs.flags import Parser, at_least, duration_ms, parse, spark_master
from txntable.jobs.outcome import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, fail, print_result
from txntable.jobs.signals import raise_on_signals
from txntable.jobs.storage_args import add_storage_option_argument, storage_options
from txntable.maintenance.replay_spark import replay
from txntable.maintenance.spark_session import start_session, stop

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "main",
    "reconstruct_state",
    "run_checkpoint",
]


def reconstruct_state(
    spark: Any,
    storage: Storage,
    version: int | None = None,
    segment: LogSegment | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TableState:
    """The table state at ``version`` (latest when None), reconciled by Spark tasks that read
    the log through the engine's storage (``maintenance/replay_spark.py``)."""
    if segment is None:
        segment = build_segment(storage, version)
    return replay(spark, storage, segment, storage_options)


def run_checkpoint(
    uri: str,
    *,
    version: int | None = None,
    part_size: int | None = None,
    spark: Any | None = None,
    master: str = "local[2]",
    storage_options: dict[str, Any] | None = None,
) -> CheckpointResult:
    """Reconstruct with Spark, write with the engine; starts (and stops) a session if needed."""
    storage = open_storage(uri, storage_options)
    segment = build_segment(storage, version)  # bad input fails here, before Spark starts
    return _checkpoint(
        storage, segment, part_size, spark=spark, master=master, storage_options=storage_options
    )


def _checkpoint(
    storage: Storage,
    segment: LogSegment,
    part_size: int | None,
    *,
    spark: Any | None,
    master: str,
    storage_options: dict[str, Any] | None,
) -> CheckpointResult:
    session = spark
    if session is None:
        session = start_session(master, "txntable-checkpoint", {})
    try:
        state = reconstruct_state(session, storage, segment.version, segment, storage_options)
    finally:
        if spark is None:
            stop(session)  # an abort during Ctrl-C
    return write_checkpoint_state(storage, state, part_size=part_size)


def _parser() -> Parser:
    parser = Parser(prog="python -m txntable.jobs.checkpoint", description=__doc__)
    parser.add_argument("uri", help="table location (path, file://, s3://, ...)")
    parser.add_argument(
        "--version",
        type=at_least(0),
        default=None,
        help="checkpoint this version (default: the newest)",
    )
    parser.add_argument(
        "--part-size",
        type=at_least(1, "action"),
        default=None,
        help="file actions per part (default: one file)",
    )
    parser.add_argument(
        "--master", type=spark_master, default="local[2]", help="Spark master (default local[2])"
    )
    parser.add_argument(
        "--cleanup",
        action="store_true",
        help="then delete expired log files (engine/checkpoint/cleanup.py)",
    )
    parser.add_argument(
        "--retention",
        type=duration_ms,
        default=None,
        help="log retention for --cleanup, e.g. 30d or 'interval 30 days' (default: the "
        "table's delta.logRetentionDuration)",
    )
    add_storage_option_argument(parser)
    parser.add_argument("--run-id", default=None, help="echoed in the result line (default: none)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(_parser(), argv)
    if isinstance(args, int):
        return args
    started = time.perf_counter()
    doc: dict[str, Any] = {"table": args.uri, "engine": "spark", "runId": args.run_id}
    writing = False
    try:
        with raise_on_signals():  # a stopped run stops its Spark JVM too
            options = storage_options(args.storage_option)
            storage = open_storage(args.uri, options)
            segment = build_segment(storage, args.version)  # refused here: nothing was started
            writing = True
            result = _checkpoint(
                storage,
                segment,
                args.part_size,
                spark=None,
                master=args.master,
                storage_options=options,
            )
            doc.update(result.to_json())
            if args.cleanup:
                snapshot = Table.open(args.uri, options).snapshot()
                cleanup = cleanup_expired_logs(snapshot, retention_ms=args.retention)
                doc["cleanup"] = cleanup.to_json()
    except (Exception, KeyboardInterrupt) as exc:  # SIGINT, or SIGTERM: a stopped run, a pod
        # every failure and every interrupt ends in the one result line (jobs/outcome.py)
        doc["seconds"] = round(time.perf_counter() - started, 3)
        return fail(doc, exc, started=writing)
    doc["seconds"] = round(time.perf_counter() - started, 3)
    print_result(doc)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
