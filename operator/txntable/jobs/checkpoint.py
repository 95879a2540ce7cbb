"""``python -m txntable.jobs.checkpoint URI``: a checkpoint whose state Spark reconstructs.

For logs too large to replay in one process: Spark reads the newest checkpoint (Parquet parts,
V2 top-level files and their sidecars) and the JSON commits after it, and reconciles the file
actions with a window keyed by ``(path, deletion-vector id)`` that keeps the newest action of each
logical file (PROTOCOL.md "Action Reconciliation"). The handful of non-file actions (protocol,
metadata, txns, domains) are collected and folded in the driver. The reconciled ``add``/``remove``
rows come back as Arrow and go through the engine's own checkpoint writer, so the output (content,
part layout, crash safety, ``_last_checkpoint``) is exactly what the inline writer produces for the
same version.

With ``--cleanup`` the expired log files are deleted afterwards (``engine/checkpoint/cleanup.py``).
Storage options come from ``TXNTABLE_STORAGE_OPTIONS`` (JSON, set by the launchers) and
``--storage-option KEY=VALUE``. Prints one JSON line; exit status 0 on success, 2 on bad input
(one ``error: ...`` line on stderr, the refusal as the JSON line with ``errorType``:
``jobs/outcome.py``; nothing written), 130/143 on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import CheckpointResult, write_checkpoint_state
from txntable.engine.errors import CorruptLogError, EngineError
from txntable.engine.model.actions import DomainMetadata, Metadata, Protocol, SetTransaction
from txntable.engine.model.features import check_readable
from txntable.engine.read.segment import LogSegment, build_segment
from txntable.engine.read.state import ADD_SCHEMA, REMOVE_SCHEMA, TableState, from_struct_column
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import LOG_DIR, SIDECAR_DIR, decode_path
from txntable.engine.table import Table
from txntable.jobs.flags import Parser, at_least, duration_ms, parse, spark_master
from txntable.jobs.outcome import EXIT_OK, fail, print_result
from txntable.jobs.signals import raise_on_sigterm
from txntable.jobs.storage_args import add_storage_option_argument, storage_options
from txntable.maintenance.spark_session import start_session, stop

#: set by the launchers (``launch/run.py``): the table's non-secret fsspec options as JSON

_DV = (
    "STRUCT<storageType: STRING, pathOrInlineDv: STRING, offset: INT, sizeInBytes: INT, "
    "cardinality: BIGINT, maxRowIndex: BIGINT>"
)
_SPARK_TYPES = {
    "path": "STRING",
    "partitionValues": "MAP<STRING, STRING>",
    "size": "BIGINT",
    "modificationTime": "BIGINT",
    "dataChange": "BOOLEAN",
    "stats": "STRING",
    "tags": "MAP<STRING, STRING>",
    "deletionVector": _DV,
    "baseRowId": "BIGINT",
    "defaultRowCommitVersion": "BIGINT",
    "clusteringProvider": "STRING",
    "deletionTimestamp": "BIGINT",
    "extendedFileMetadata": "BOOLEAN",
}
_NON_FILE = ("protocol", "metaData", "txn", "domainMetadata")


def _struct_ddl(schema: pa.Schema) -> str:
    return "STRUCT<" + ", ".join(f"`{f.name}`: {_SPARK_TYPES[f.name]}" for f in schema) + ">"


#: How commits (and V2 JSON checkpoints) are read: file actions typed, non-file actions kept as
#: their raw JSON text (Spark keeps an object's text when the schema says STRING).
COMMIT_DDL = (
    f"add {_struct_ddl(ADD_SCHEMA)}, remove {_struct_ddl(REMOVE_SCHEMA)}, "
    "protocol STRING, metaData STRING, txn STRING, domainMetadata STRING, "
    "sidecar STRUCT<path: STRING>"
)


def _spark_path(storage: Storage, relative: str) -> str:
    if isinstance(storage, LocalStorage):
        return "file://" + storage.root_path + "/" + relative
    uri = storage.uri(relative)
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def _conformed(df: Any, column: str, schema: pa.Schema) -> Any:
    """``column`` of a checkpoint DataFrame as the struct the commits use (missing -> null)."""
    from pyspark.sql import functions as sf

    if column not in df.columns:
        return sf.lit(None).cast(_struct_ddl(schema))
    present = set(df.schema[column].dataType.fieldNames())
    members = []
    for f in schema:
        if f.name in present:
            value = sf.col(f"{column}.{f.name}").cast(_SPARK_TYPES[f.name])
        elif f.name == "stats" and "stats_parsed" in present:
            value = sf.to_json(sf.col(f"{column}.stats_parsed"))
        else:
            value = sf.lit(None).cast(_SPARK_TYPES[f.name])
        members.append(value.alias(f.name))
    return sf.when(sf.col(column).isNotNull(), sf.struct(*members))


def _checkpoint_frames(spark: Any, storage: Storage, segment: LogSegment) -> list[Any]:
    """The checkpoint's rows as (version, add, remove, non-file JSON) DataFrames."""
    from pyspark.sql import functions as sf

    ref = segment.checkpoint
    if ref is None:
        return []
    parquet = [f"{LOG_DIR}/{f.name}" for f in ref.files if f.name.endswith(".parquet")]
    json_files = [f"{LOG_DIR}/{f.name}" for f in ref.files if f.name.endswith(".json")]
    frames: list[Any] = []
    sidecars: list[str] = []
    if parquet:
        df = spark.read.parquet(*[_spark_path(storage, p) for p in parquet])
        non_file = [
            (sf.to_json(sf.col(c)) if c in df.columns else sf.lit(None).cast("string")).alias(c)
            for c in _NON_FILE
        ]
        frames.append(
            df.select(
                _conformed(df, "add", ADD_SCHEMA).alias("add"),
                _conformed(df, "remove", REMOVE_SCHEMA).alias("remove"),
                *non_file,
            )
        )
        if "sidecar" in df.columns:
            sidecars += [r[0] for r in df.select("sidecar.path").dropna().collect()]
    if json_files:
        df = spark.read.schema(COMMIT_DDL).json([_spark_path(storage, p) for p in json_files])
        frames.append(df.select("add", "remove", *_NON_FILE))
        sidecars += [r[0] for r in df.select("sidecar.path").dropna().collect()]
    if sidecars:
        paths = [
            _spark_path(storage, f"{LOG_DIR}/{SIDECAR_DIR}/{decode_path(p).rsplit('/', 1)[-1]}")
            for p in sidecars
        ]
        df = spark.read.parquet(*paths)
        nulls = [sf.lit(None).cast("string").alias(c) for c in _NON_FILE]
        frames.append(
            df.select(
                _conformed(df, "add", ADD_SCHEMA).alias("add"),
                _conformed(df, "remove", REMOVE_SCHEMA).alias("remove"),
                *nulls,
            )
        )
    return [f.withColumn("version", sf.lit(ref.version).cast("bigint")) for f in frames]


def _commit_frame(spark: Any, storage: Storage, segment: LogSegment) -> Any | None:
    from pyspark.sql import functions as sf

    if not segment.commits:
        return None
    paths = [_spark_path(storage, f"{LOG_DIR}/{c.file.name}") for c in segment.commits]
    df = spark.read.schema(COMMIT_DDL).json(paths)
    version = sf.regexp_extract(sf.input_file_name(), r"(\d+)\.json$", 1).cast("bigint")
    return df.select("add", "remove", *_NON_FILE, version.alias("version"))


def _reconcile(actions: Any) -> tuple[pa.Table, pa.Table]:
    """Newest action per logical file: live adds and tombstones, as Arrow tables."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    files = actions.where(sf.col("add").isNotNull() | sf.col("remove").isNotNull())
    dv = sf.coalesce(sf.col("add.deletionVector"), sf.col("remove.deletionVector"))
    offset = sf.when(dv.offset.isNotNull(), sf.concat(sf.lit("@"), dv.offset.cast("string")))
    dv_id = sf.concat(dv.storageType, dv.pathOrInlineDv, sf.coalesce(offset, sf.lit("")))
    key_path = sf.coalesce(sf.col("add.path"), sf.col("remove.path"))
    window = Window.partitionBy(key_path, dv_id).orderBy(sf.col("version").desc())
    newest = files.withColumn("_rank", sf.row_number().over(window)).where(sf.col("_rank") == 1)
    both = newest.select("add", "remove").toArrow()  # one Spark job for adds and tombstones
    is_add = pc.is_valid(both.column("add"))
    return (
        from_struct_column(both.column("add").filter(is_add), ADD_SCHEMA),
        from_struct_column(both.column("remove").filter(pc.invert(is_add)), REMOVE_SCHEMA),
    )


def _fold_non_file(rows: list[Any], version: int) -> tuple[Protocol, Metadata, dict[str, Any]]:
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, SetTransaction] = {}
    domains: dict[str, DomainMetadata] = {}
    for row in sorted(rows, key=lambda r: r["version"]):  # stable: checkpoint rows stay first
        if row["protocol"]:
            protocol = Protocol.from_json(json.loads(row["protocol"]))
        if row["metaData"]:
            metadata = Metadata.from_json(json.loads(row["metaData"]))
        if row["txn"]:
            txn = SetTransaction.from_json(json.loads(row["txn"]))
            txns[txn.app_id] = txn
        if row["domainMetadata"]:
            domain = DomainMetadata.from_json(json.loads(row["domainMetadata"]))
            if domain.removed:
                domains.pop(domain.domain, None)
            else:
                domains[domain.domain] = domain
    if protocol is None or metadata is None:
        raise CorruptLogError(f"the log has no protocol or no metadata at version {version}")
    return protocol, metadata, {"txns": txns, "domains": domains}


def reconstruct_state(
    spark: Any, storage: Storage, version: int | None = None, segment: LogSegment | None = None
) -> TableState:
    """The table state at ``version`` (latest when None), reconciled by Spark."""
    from pyspark.sql import functions as sf

    if segment is None:
        segment = build_segment(storage, version)
    frames = _checkpoint_frames(spark, storage, segment)
    commits = _commit_frame(spark, storage, segment)
    if commits is not None:
        frames.append(commits)
    actions = frames[0]
    for frame in frames[1:]:
        actions = actions.unionByName(frame)
    non_file = actions.where(sf.coalesce(*[sf.col(c) for c in _NON_FILE]).isNotNull())
    protocol, metadata, rest = _fold_non_file(
        non_file.select("version", *_NON_FILE).collect(), segment.version
    )
    check_readable(protocol)
    files, tombstones = _reconcile(actions)
    return TableState(
        segment.version, protocol, metadata, files, tombstones, rest["txns"], rest["domains"]
    )


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
    session = spark
    if session is None:
        session = start_session(master, "txntable-checkpoint", {})
    try:
        state = reconstruct_state(session, storage, version, segment)
    finally:
        if spark is None:
            stop(session)  # an abort during Ctrl-C
    return write_checkpoint_state(storage, state, part_size=part_size)


def main(argv: Sequence[str] | None = None) -> int:
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
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    started = time.perf_counter()
    try:
        with raise_on_sigterm():  # a stopped run stops its Spark JVM too
            doc = _run(args)
    except (EngineError, KeyboardInterrupt) as exc:  # bad input; SIGINT, or SIGTERM: a stopped run
        # one result line, with errorType for a refusal (jobs/outcome.py)
        return fail({"table": args.uri, "engine": "spark", "runId": args.run_id}, exc)
    doc["seconds"] = round(time.perf_counter() - started, 3)
    print_result(doc)
    return EXIT_OK


def _run(args: argparse.Namespace) -> dict[str, Any]:
    """The checkpoint (and cleanup) ``args`` ask for; its result line without ``seconds``."""
    retention_ms = args.retention
    options = storage_options(args.storage_option)
    result = run_checkpoint(
        args.uri,
        version=args.version,
        part_size=args.part_size,
        master=args.master,
        storage_options=options,
    )
    doc: dict[str, Any] = {**result.to_json(), "engine": "spark", "runId": args.run_id}
    if args.cleanup:
        snapshot = Table.open(args.uri, options).snapshot()
        doc["cleanup"] = cleanup_expired_logs(snapshot, retention_ms=retention_ms).to_json()
    return doc


if __name__ == "__main__":
    sys.exit(main())
