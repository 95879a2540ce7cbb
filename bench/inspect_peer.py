"""``txntable inspect --json`` against deltalake doing the same work, whole processes.

deltalake has no command that prints a table's document, so the peer is a script: open the
table, take ``get_add_actions()`` and ``file_uris()``, and print the same document (protocol,
metadata, then every file's path, URI, size, partition values and deletion vector), a batch
at a time as ours does; a smoke test holds its files to ours. A third row opens the table and
takes the two lists without writing anything: the floor of the peer's reading alone. Rounds
alternate the three; each is a fresh interpreter, timed and measured (``VmHWM`` at exit) by
``bench.process``.

``python -m bench.inspect_peer [--rounds N] [--table PATH]`` (default: the read path's
100,000-file table of ``bench.gen``).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from bench import gen
from bench.process import run_cli, run_script

#: deltalake printing the document ``txntable inspect --json`` prints
PEER_DOCUMENT = r"""
import json, sys
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

table = DeltaTable(sys.argv[1])
protocol, metadata = table.protocol(), table.metadata()
actions = pa.table(table.get_add_actions(flatten=False))
uris = table.file_uris()
doc = {
    "uri": table.table_uri,
    "version": table.version(),
    "protocol": {
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
        "readerFeatures": protocol.reader_features,
        "writerFeatures": protocol.writer_features,
    },
    "metadata": {
        "id": metadata.id,
        "name": metadata.name,
        "partitionColumns": metadata.partition_columns,
        "configuration": metadata.configuration,
        "schemaString": table.schema().to_json(),
        "createdTime": metadata.created_time,
    },
    "numFiles": actions.num_rows,
    "sizeBytes": pc.sum(actions.column("size_bytes")).as_py(),
    "files": [],
}
head = json.dumps(doc, ensure_ascii=False)
sys.stdout.write(head[: head.rindex("[") + 1])
names = set(actions.column_names)
for start in range(0, actions.num_rows, 8192):
    part = actions.slice(start, 8192)
    def column(name):
        return part.column(name).to_pylist() if name in names else [None] * part.num_rows

    # typed partition values, given back as the log's strings (dates: ISO, as the log has them)
    partitions = [
        {k: None if v is None else str(v) for k, v in (row or {}).items()}
        for row in column("partition")
    ]
    vectors = column("deletionVector")
    batch = [
        {"path": p, "uri": u, "size": s, "partitionValues": pv, "deletionVector": dv}
        for p, u, s, pv, dv in zip(
            part.column("path").to_pylist(),
            uris[start : start + 8192],
            part.column("size_bytes").to_pylist(),
            partitions,
            vectors,
        )
    ]
    sys.stdout.write(("" if start == 0 else ", ") + json.dumps(batch, ensure_ascii=False)[1:-1])
sys.stdout.write("]}\n")
"""

#: deltalake reading the same two lists, writing nothing
PEER_READ = r"""
import sys
from deltalake import DeltaTable

table = DeltaTable(sys.argv[1])
table.get_add_actions(flatten=False)
table.file_uris()
"""

CONTENDERS = ("ours", "deltalake, same document", "deltalake, lists only")


def measure(table: Path, rounds: int) -> dict[str, Any]:
    """Each contender ``rounds`` times, alternated; seconds, peak MB and output bytes."""
    env = {"ARROW_DEFAULT_MEMORY_POOL": None}  # as a user's shell has it
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    for _ in range(rounds):
        for name in CONTENDERS:
            if name == "ours":
                got = run_cli(["inspect", "--json", str(table)], env=env)
            else:
                code = PEER_DOCUMENT if name == "deltalake, same document" else PEER_READ
                got = run_script(code, [str(table)], env=env)
            runs[name].append(
                {"s": got["process_s"], "mb": got["peak_mb"], "bytes": len(got["stdout"])}
            )
    return {"table": str(table), "rounds": rounds, "load": os.getloadavg(), "runs": runs}


def render(result: dict[str, Any]) -> str:
    runs = result["runs"]

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    def span(name: str, key: str, unit: str, digits: int) -> str:
        got = [r[key] for r in runs[name]]
        low, high = f"{min(got):.{digits}f}", f"{max(got):.{digits}f}"
        return f"{statistics.median(got):.{digits}f} {unit} ({low}-{high})"

    peer = "deltalake, same document"
    lines = [
        f"{result['rounds']} rounds alternated; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in result['load'])}. Ratios: ours over the peer's "
        "same document.",
        "",
        "| process | time, median (min-max) | peak RSS, median (min-max) | output MB | time ratio "
        "| memory ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in CONTENDERS:
        time_ratio, memory_ratio = (
            med(name, "s") / med(peer, "s"),
            med(name, "mb") / med(peer, "mb"),
        )
        ratios = (
            f"| **{time_ratio:.2f}x** | **{memory_ratio:.2f}x** |" if name == "ours" else "| | |"
        )
        lines.append(
            f"| {name} | {span(name, 's', 's', 2)} | {span(name, 'mb', 'MB', 0)} "
            f"| {med(name, 'bytes') / 1e6:.1f} {ratios}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inspect_peer", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--table", type=Path, help="default: bench.gen's 100,000-file table")
    args = parser.parse_args(argv)
    table = args.table or gen.table_path(gen.TableSpec())
    print(render(measure(table, args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
