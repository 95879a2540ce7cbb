"""``python -m txntable.jobs.optimize URI ...``: the OPTIMIZE driver, one JSON line out.

This is what a SparkApplication, a Kubernetes Job running ``spark-submit``, or a local
subprocess starts, and what ``txntable optimize`` runs in-process. It prints one JSON result
line whatever happens once its arguments are read (``jobs/outcome.py``). Exit status: 0 when the
run finished (bins skipped because of concurrent writers still count as finished, and are
listed); 1 when it failed after starting (the line still reports what was committed), or Spark
could not start or a Spark job failed; 2 on bad input (a bad flag, which is one ``error:`` line
and no result line; not a table, unsupported writer feature, bad predicate, bad size; a store
that could not be read), nothing changed; 130 on SIGINT and 143 on SIGTERM, after stopping its
Spark processes. On failure the line carries ``error`` (one line, never a JVM stack trace), and
``errorType`` when the input was refused (``jobs/outcome.py``), and stderr ends with
``error: ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from txntable import interrupts
from txntable.api import optimize_options as settings
from txntable.engine import EngineError
from txntable.jobs.flags import (
    Parser,
    at_least,
    duration_ms,
    parse,
    percent,
    positive_duration_ms,
    spark_master,
    whole_number,
)
from txntable.jobs.outcome import EXIT_FAILED, EXIT_OK, fail, print_result
from txntable.jobs.signals import raise_on_signals
from txntable.jobs.storage_args import add_storage_option_argument, storage_options

# The engine, the executors and the metrics are imported where they are used: ``txntable``
# builds its parser from ``add_arguments`` on every command (``--help`` included), which must
# not load pyarrow, the log reader or prometheus_client.
if TYPE_CHECKING:
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine import Table
    from txntable.maintenance.optimize import BinExecutor, OptimizeResult
    from txntable.observability.metrics import EngineMetrics


#: ``--vacuum-spark-min-files`` when not given: ``maintenance.vacuum_spark.SPARK_MIN_FILES``,
#: repeated here because that module loads the engine (a unit test keeps the two equal)
VACUUM_SPARK_MIN_FILES = 100_000
#: ``--distribute-zorder-above`` when not given: ``executor_spark.DISTRIBUTE_ZORDER_ABOVE``
#: (256 MiB), repeated for the same reason (a unit test keeps the two equal)
DISTRIBUTE_ZORDER_ABOVE = "256Mi"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by the job and ``txntable optimize``."""
    parser.add_argument("uri", help="table location (path, file://, s3://, ...)")
    # the run's OPTIMIZE settings: one record (api/optimize_options.py), which the setting
    # flags fill too (options_from_args); a flag left out keeps the record's value
    parser.add_argument(
        "--options-json",
        default=None,
        metavar="JSON",
        help="the settings document as JSON, e.g. '{\"targetFileSize\": 1073741824}', what "
        "the controller passes; the setting flags, when given, override its keys (default: "
        "each setting's own default, as its flag says)",
    )
    add_setting_arguments(parser)
    parser.add_argument(
        "--executor",
        choices=("spark", "arrow"),
        default="spark",
        help="where bins are rewritten: Spark (default) or in-process with Arrow (no JVM)",
    )
    parser.add_argument(
        "--master", type=spark_master, default="local[2]", help="Spark master (default local[2])"
    )
    parser.add_argument(
        "--distribute-zorder-above",
        default=DISTRIBUTE_ZORDER_ABOVE,
        metavar="SIZE",
        help="with --executor spark, a Z-order bin of more input bytes runs as a Spark job of its "
        f"own instead of one task (docs/optimize.md; default {DISTRIBUTE_ZORDER_ABOVE})",
    )
    parser.add_argument(
        "--workers",
        type=at_least(1, "thread"),
        default=2,
        metavar="N",
        help="threads of the arrow executor (default 2)",
    )
    add_storage_option_argument(parser)
    parser.add_argument(
        "--run-id",
        default=None,
        metavar="ID",
        help="recorded in commitInfo as txntableRunId (default: none)",
    )
    parser.add_argument(
        "--max-attempts",
        type=at_least(1, "attempt"),
        default=1000,
        metavar="N",
        help="commit attempts per batch before giving up (default 1000)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    _add_vacuum_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the job's one JSON result line, not the text summary txntable optimize "
        "prints by default (python -m txntable.jobs.optimize always prints the JSON line)",
    )


def _add_vacuum_arguments(parser: argparse.ArgumentParser) -> None:
    """The VACUUM a run may end with (``--vacuum``) or be (``--vacuum-only``)."""
    parser.add_argument(
        "--vacuum",
        action="store_true",
        help="after compacting, VACUUM the files no retained version reads (engine/vacuum.py)",
    )
    parser.add_argument(
        "--vacuum-only",
        action="store_true",
        help="VACUUM without planning a compaction (the controller's run for a table with "
        "nothing to compact; the compaction options are ignored)",
    )
    parser.add_argument(
        "--vacuum-retention",
        type=duration_ms,
        default=None,
        metavar="DURATION",
        help="VACUUM retention, e.g. 7d or '7 days' (default: the table's "
        "delta.deletedFileRetentionDuration; a shorter one is refused, never forced)",
    )
    parser.add_argument(
        "--vacuum-dry-run", action="store_true", help="report what VACUUM would delete, delete none"
    )
    parser.add_argument(
        "--vacuum-spark-min-files",
        type=at_least(0, "files"),
        default=VACUUM_SPARK_MIN_FILES,
        metavar="N",
        help="with --executor spark, VACUUM lists and deletes as Spark tasks when the log knows "
        f"at least N files, live and removed (default {VACUUM_SPARK_MIN_FILES})",
    )


def _size(text: str | None, flag: str) -> int | None:
    """The size given to ``--flag``, in the CRDs' quantity syntax (``128Mi``, ``500M``)."""
    from txntable.api.quantity import QuantityError, parse_size
    from txntable.maintenance.errors import InvalidPolicyError

    if text is None:
        return None
    try:
        return parse_size(text)
    except QuantityError as exc:
        raise InvalidPolicyError(f"--{flag}: {exc}") from None


def add_setting_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per OPTIMIZE setting, made from the record's field metadata
    (``api.optimize_options.Flag``): the flag, its help and its parser are declared there once."""
    for name, flag in settings.flags():
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": flag.help}
        if flag.kind == settings.CHOICE:
            kwargs["choices"] = flag.choices
        else:
            kwargs["metavar"] = flag.metavar
        parse = _FLAG_TYPES.get(flag.kind)
        if parse is not None:
            kwargs["type"] = parse(flag)
        parser.add_argument(flag.name, **kwargs)


#: argparse's parser for each kind of setting flag; the rest arrive as text (a size is read
#: after the flags, so a bad one is reported in the result line like the other bad settings)
_FLAG_TYPES: dict[str, Callable[[settings.Flag], Callable[[str], Any]]] = {
    settings.COUNT: lambda flag: at_least(flag.minimum or 0, flag.unit),
    settings.WHOLE: lambda flag: whole_number,
    settings.PERCENT: lambda flag: percent,
    settings.DURATION: lambda flag: positive_duration_ms,
}


def options_from_args(args: argparse.Namespace) -> OptimizeOptions:
    """The run's settings: ``--options-json`` (the controller's), with every setting flag that
    was given on top (a human's). The one place flags become settings; a refused value is named
    by its flag, or by its key in ``--options-json``."""
    from dataclasses import replace

    from txntable.api.errors import ApiError, InvalidSpecError
    from txntable.maintenance.errors import InvalidPolicyError

    try:
        base = (
            settings.OptimizeOptions()
            if args.options_json is None
            else settings.OptimizeOptions.loads(args.options_json)
        )
    except ApiError as exc:
        raise InvalidPolicyError(f"--options-json: {exc}") from None
    given: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for name, flag in settings.flags():
        text = getattr(args, name)
        if text is None:
            continue
        labels[f"{settings.DOCUMENT}.{settings.key(name)}"] = flag.name
        if flag.kind == settings.SIZE:
            given[name] = _size(text, flag.name.lstrip("-"))
        elif flag.kind == settings.COLUMNS:
            given[name] = tuple(c.strip() for c in text.split(",") if c.strip())
        elif flag.kind == settings.PREDICATE:  # --where "" selects every partition
            given[name] = text or None
        else:
            given[name] = text
    try:
        return replace(base, **given)
    except InvalidSpecError as exc:
        given_as = {path: labels.get(path) or f"--options-json {path}" for path, _ in exc.errors}
        raise InvalidPolicyError(
            "; ".join(f"{given_as[path]}: {why}" for path, why in exc.errors)
        ) from None


def make_executor(args: argparse.Namespace) -> BinExecutor:
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.executor_spark import SparkExecutor  # pyspark only when started

    if args.executor == "arrow":
        return ArrowExecutor(workers=args.workers)
    above = _size(args.distribute_zorder_above, "distribute-zorder-above")
    name = "txntable-vacuum" if args.vacuum_only else "txntable-optimize"  # as Spark shows it
    return SparkExecutor(master=args.master, app_name=name, distribute_zorder_above=above)


#: Set by the controller's launchers: the TxnTable as ``namespace/name`` (a metrics label).
ENV_TABLE_NAME = "TXNTABLE_TABLE_NAME"


def execute(
    args: argparse.Namespace, metrics: EngineMetrics | None = None
) -> tuple[OptimizeResult, int]:
    """Run with parsed arguments; bad input raises (``EngineError``/``MaintenanceError``)."""
    from txntable.engine import CommitOptions, Table
    from txntable.maintenance.errors import MaintenanceError
    from txntable.maintenance.optimize import optimize

    if args.vacuum_only:
        return vacuum_only(args)
    wanted = options_from_args(args)
    options = storage_options(args.storage_option)
    if args.max_attempts < 1:
        raise MaintenanceError("--max-attempts must be at least 1")
    table = Table.open(args.uri, options)
    executor = make_executor(args)
    try:
        result = optimize(
            table,
            wanted,
            executor,
            storage_options=options,
            commit_options=CommitOptions(
                max_attempts=args.max_attempts,
                run_id=args.run_id,
                table_name=os.environ.get(ENV_TABLE_NAME),
                observer=metrics,
            ),
            dry_run=args.dry_run,
        )
        if args.vacuum and not args.dry_run and not result.error:
            # before the executor closes: a huge table's VACUUM runs in its Spark session
            result.vacuum, vacuum_error = run_vacuum(table, args, executor, options)
            if vacuum_error:
                result.error = vacuum_error
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    return result, (EXIT_FAILED if result.error else EXIT_OK)


#: files named in the result line; the counts cover all of them
_VACUUM_SAMPLE = 20


def run_vacuum(
    table: Table,
    args: argparse.Namespace,
    executor: BinExecutor | None = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """VACUUM after the compaction, on the latest snapshot (which holds this run's removes):
    its summary for the result line, and an error when it could not run. On the Spark executor
    a table of at least ``--vacuum-spark-min-files`` files is listed and deleted by Spark tasks
    in the executor's session (``maintenance/vacuum_spark.py``)."""
    from txntable.durations import format_seconds
    from txntable.engine import RetentionTooShortError
    from txntable.engine import vacuum_table as vacuum
    from txntable.maintenance.errors import MaintenanceError
    from txntable.maintenance.executor_spark import SparkExecutor
    from txntable.maintenance.vacuum_spark import SparkSweeper, wants_spark

    try:
        retention_ms = args.vacuum_retention
        snapshot = table.snapshot()
        sweeper = None
        if isinstance(executor, SparkExecutor) and wants_spark(
            snapshot, args.vacuum_spark_min_files
        ):
            sweeper = SparkSweeper(spark=executor.spark, storage_options=storage_options)
        result = vacuum(
            snapshot, retention_ms=retention_ms, dry_run=args.vacuum_dry_run, sweeper=sweeper
        )
    except RetentionTooShortError as exc:
        # runs never force it: say how to keep the table's retention, or where forcing is
        text = (
            f"{exc}; a compaction run never forces a shorter retention: ask for at least "
            f"{format_seconds(max(1, exc.table_retention_ms // 1000))} (--vacuum-retention, a "
            "policy's spec.vacuum.retention), or VACUUM with txntable vacuum --force"
        )
        return {"error": text}, f"vacuum: {text}"
    except (EngineError, MaintenanceError) as exc:
        interrupts.reraise(exc)  # an interrupt a library turned into an error stays one
        return {"error": str(exc)}, f"vacuum: {exc}"
    doc = result.to_json()
    doc["files"] = doc["files"][:_VACUUM_SAMPLE]
    if "iceberg" in doc:  # a UniForm table: the files kept for Iceberg readers, counted in full
        doc["iceberg"]["held"] = doc["iceberg"]["held"][:_VACUUM_SAMPLE]
    return doc, None


def vacuum_only(args: argparse.Namespace) -> tuple[OptimizeResult, int]:
    """``--vacuum-only``: VACUUM the latest snapshot without planning a compaction. The result
    is an empty compaction's with ``vacuum``, so the controller reads it as it reads any run's;
    ``--dry-run`` makes the VACUUM a dry run. Bad input (not a table) raises before anything."""
    import time

    from txntable.engine import Table
    from txntable.maintenance.optimize import OptimizeResult

    started = time.monotonic()
    options = storage_options(args.storage_option)
    table = Table.open(args.uri, options)
    read_version = table.version()
    if args.dry_run:
        args = argparse.Namespace(**{**vars(args), "vacuum_dry_run": True})
    executor = make_executor(args)  # Spark starts only for a table above the Spark threshold
    try:
        doc, error = run_vacuum(table, args, executor, options)
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    result = OptimizeResult(
        table=table.uri,
        version=table.version(),  # VACUUM START/END are commits of their own
        read_version=read_version,
        executor=executor.name,
        run_id=args.run_id,
        vacuum=doc,
        error=error,
        seconds=time.monotonic() - started,
    )
    return result, (EXIT_FAILED if error else EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="python -m txntable.jobs.optimize", description=__doc__)
    add_arguments(parser)
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    from txntable.api.common import RunKind
    from txntable.observability.metrics import EngineMetrics
    from txntable.observability.pushgateway import push_run_metrics
    from txntable.observability.run_report import engine_summary

    metrics = EngineMetrics()
    try:
        with raise_on_signals():  # a stopped run stops its Spark JVM too
            result, code = execute(args, metrics)
    except (Exception, KeyboardInterrupt) as exc:  # SIGINT, or SIGTERM: a stopped run, a pod
        # every failure and every interrupt ends in the one result line (jobs/outcome.py)
        doc: dict[str, Any] = {"table": args.uri, "executor": args.executor, "runId": args.run_id}
        if args.vacuum_only:
            doc["vacuumOnly"] = True
        return fail(doc, exc)
    doc = result.to_json()
    if args.vacuum_only:
        doc["vacuumOnly"] = True
    if not args.dry_run:
        # the engine's commit counters travel in the result line (the controller exports
        # them) and, when configured, to a Pushgateway
        doc["engineMetrics"] = engine_summary(metrics)
        table = os.environ.get(ENV_TABLE_NAME) or "unnamed"
        kind = RunKind.VACUUM if args.vacuum_only else RunKind.OPTIMIZE
        push_run_metrics(metrics.registry, kind=kind, table=table)
    print_result(doc)
    if result.error:
        print(f"error: {result.error}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
