"""``txntable inspect URI``: what a table is, as a readable summary or one JSON object.

Protocol, metadata, schema, the last checkpoint, small-file figures and the files, all read from
the log (no data file is opened), so it answers as fast as the log loads. The figures (pyarrow)
and the engine are imported when the command runs, not when the parser is built. The files are
turned into JSON a slice at a time and the document written as it is made: at 100,000 files a
dict per file and the document as one string were more memory than the snapshot itself. The
snapshot is loaded without the checkpoint's statistics, which no part of the output uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from txntable.cli.errors import CliError
from txntable.jobs.flags import at_least
from txntable.jobs.storage_args import add_storage_option_argument, open_table

if TYPE_CHECKING:
    from txntable.engine import Snapshot


def register(sub: Any) -> None:
    parser = sub.add_parser("inspect", help="show a table's version, protocol, metadata and files")
    parser.add_argument("uri", help="table location (path, file://, memory://, s3://, ...)")
    parser.add_argument(
        "--version",
        type=at_least(0),
        default=None,
        metavar="N",
        help="time travel to this version (default: the newest)",
    )
    add_storage_option_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--max-files",
        type=at_least(0, "files"),
        default=20,
        metavar="N",
        help="files listed in the summary (default 20)",
    )
    parser.add_argument(
        "--small-below",
        default=None,
        metavar="SIZE",
        help="files under this size count as small, a Kubernetes quantity "
        "(default 128Mi: what optimize and a CompactionPolicy aim at by default)",
    )
    parser.set_defaults(run=run)


#: live files turned into JSON entries at a time: the document of a 100,000-file table never
#: holds a Python object per file (``file_batches``)
BATCH_ROWS = 8192


def file_batches(snapshot: Snapshot, limit: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """The ``files`` entries of the document, in the log's order, ``BATCH_ROWS`` at a time;
    only the first ``limit`` with a limit."""
    files = snapshot.files()
    total = files.num_rows if limit is None else min(limit, files.num_rows)
    for start in range(0, total, BATCH_ROWS):
        stop = min(start + BATCH_ROWS, total)
        part = files.slice(start, stop - start)
        yield [
            {
                "path": path,
                "uri": uri,
                "size": size,
                "partitionValues": partitions,
                "deletionVector": {k: v for k, v in dv.items() if v is not None} if dv else None,
            }
            for path, size, dv, uri, partitions in zip(
                part.column("path").to_pylist(),
                part.column("size").to_pylist(),
                part.column("deletionVector").to_pylist(),
                snapshot.file_uris(start, stop),
                snapshot.raw_partition_values(start, stop),
                strict=True,
            )
        ]


def write_json(doc: dict[str, Any], batches: Iterable[list[dict[str, Any]]], out: TextIO) -> None:
    """``doc`` with ``files`` set to the entries of ``batches``, byte for byte as
    ``print(json.dumps(doc, ensure_ascii=False))`` prints it, a batch at a time: the document
    is never one string (40 MB at 100,000 files, and as much again to encode it). Like any
    stream, one stopped part-way (Ctrl-C, a stdout that cannot encode a path) leaves a cut-off
    document before the error; the exit status says it failed."""
    head = json.dumps({**doc, "files": []}, ensure_ascii=False)
    if not head.endswith('"files": []}'):  # files is the last key: the list closes the object
        raise AssertionError("files must be the document's last key")
    out.write(head[: -len("]}")])
    first = True
    for batch in batches:
        if batch:
            out.write(("" if first else ", ") + json.dumps(batch, ensure_ascii=False)[1:-1])
            first = False
    out.write("]}\n")


def describe(
    snapshot: Snapshot, small_below: int | None = None, max_files: int | None = None
) -> dict[str, Any]:
    """The JSON document of ``inspect --json``; files under ``small_below`` bytes count as small
    (default: what optimize aims at, ``inspect_figures.DEFAULT_SMALL_BELOW``). With
    ``max_files``, ``files`` lists only the first ones (``file_batches``)."""
    from txntable.cli import inspect_figures as figures
    from txntable.maintenance.clustering import describe_clustering

    if small_below is None:
        small_below = figures.DEFAULT_SMALL_BELOW
    protocol = snapshot.protocol
    metadata = snapshot.metadata
    return {
        "uri": snapshot.storage.root_uri,
        "version": snapshot.version,
        "timestamp": snapshot.timestamp_ms,
        "protocol": {
            "minReaderVersion": protocol.min_reader_version,
            "minWriterVersion": protocol.min_writer_version,
            "readerFeatures": protocol.reader_features,
            "writerFeatures": protocol.writer_features,
        },
        "metadata": {
            "id": metadata.id,
            "name": metadata.name,
            "partitionColumns": list(metadata.partition_columns),
            "configuration": dict(metadata.configuration),
            "schemaString": metadata.schema_string,
            "createdTime": metadata.created_time,
        },
        # liquid clustering: the columns OPTIMIZE clusters by (None: not a clustered table)
        "clusteringColumns": describe_clustering(snapshot),
        "schema": figures.schema_columns(snapshot),
        "checkpoint": figures.last_checkpoint(snapshot),
        "numFiles": snapshot.num_files,
        "sizeBytes": snapshot.size_bytes,
        "smallFiles": figures.small_files(snapshot, small_below),
        "files": [entry for batch in file_batches(snapshot, max_files) for entry in batch],
    }


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def summary(doc: dict[str, Any], max_files: int) -> str:
    p = doc["protocol"]
    m = doc["metadata"]
    features = sorted(set(p["readerFeatures"] or []) | set(p["writerFeatures"] or []))
    n = doc["numFiles"]
    avg = doc["sizeBytes"] / n if n else 0
    lines = [
        f"table      {doc['uri']}",
        f"version    {doc['version']}",
        f"protocol   reader {p['minReaderVersion']}, writer {p['minWriterVersion']}"
        + (f" ({', '.join(features)})" if features else ""),
        f"id         {m['id']}",
        f"partitions {', '.join(m['partitionColumns']) or '(none)'}",
        *(
            [f"clustering {', '.join(doc['clusteringColumns']) or '(no columns)'}"]
            if doc.get("clusteringColumns") is not None
            else []
        ),
        f"files      {n} ({_human(doc['sizeBytes'])}, average {_human(avg)})",
    ]
    lines += _figure_lines(doc)
    if m["configuration"]:
        lines.append(
            "properties " + ", ".join(f"{k}={v}" for k, v in sorted(m["configuration"].items()))
        )
    for f in doc["files"][:max_files]:
        pv = ",".join(f"{k}={'null' if v is None else v}" for k, v in f["partitionValues"].items())
        lines.append(f"  {_human(f['size']):>10}  {f['path']}" + (f"  [{pv}]" if pv else ""))
    if n > max_files:
        lines.append(f"  ... {n - max_files} more")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _figure_lines(doc: dict[str, Any]) -> list[str]:
    """Schema, last checkpoint and small files, one line each, then the top partitions."""
    columns = ", ".join(
        f"{c['name']} {c['type']}" + (" (partition)" if c["partition"] else "")
        for c in doc["schema"]
    )
    ckpt = doc["checkpoint"]
    if ckpt is None:
        checkpoint = f"none ({_count(doc['version'] + 1, 'commit')} since the start)"
    else:
        parts = f"{ckpt['parts']} parts" if ckpt["parts"] > 1 else "1 file"
        checkpoint = (
            f"version {ckpt['version']} ({_count(ckpt['commitsSince'], 'commit')} since), "
            f"{parts}, {_human(ckpt['sizeBytes'])}"
        )
    small = doc["smallFiles"]
    lines = [
        f"columns    {columns}",
        f"checkpoint {checkpoint}",
        f"small      {_count(small['files'], 'file')} under {_human(small['below'])} "
        f"({_human(small['bytes'])})"
        + (f" in {small['partitions']} partitions" if small.get("partitions") else ""),
    ]
    lines += [
        f"  {top['partition']}: {_count(top['files'], 'file')} ({_human(top['bytes'])})"
        for top in small.get("top", [])
    ]
    return lines


def run(args: argparse.Namespace) -> int:
    from txntable.api.quantity import QuantityError, parse_size

    try:
        below = None if args.small_below is None else parse_size(args.small_below)
    except QuantityError as exc:
        raise CliError(f"--small-below: {exc}") from None
    from txntable.engine import Snapshot

    # without the checkpoint's statistics, which nothing here reads: the snapshot takes less
    # than half the memory
    snapshot = Snapshot.load(open_table(args).storage, args.version, stats=False)
    if args.json:
        write_json(describe(snapshot, below, max_files=0), file_batches(snapshot), sys.stdout)
    else:
        print(summary(describe(snapshot, below, max_files=args.max_files), args.max_files))
    return 0
