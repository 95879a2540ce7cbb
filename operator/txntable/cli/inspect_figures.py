"""What ``txntable inspect`` adds to the log's facts: schema, last checkpoint, small files.

An operator on call asks three things of a table before touching it: what its columns are,
how far the log is from its last checkpoint (and how big that checkpoint is), and where the
small files are. Everything here is arithmetic over a snapshot already loaded (its Arrow file
list and the checkpoint files its listing saw): no data file is opened, so ``inspect`` stays as
fast as loading the log.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.api import defaults
from txntable.api.quantity import parse_size
from txntable.engine import Snapshot, parse_schema

#: what ``txntable optimize`` (and a CompactionPolicy) aims at by default: files below it are
#: the ones a default compaction rewrites
DEFAULT_SMALL_BELOW = parse_size(defaults.TARGET_FILE_SIZE)
#: partitions listed by the small-file figures, the ones with the most small files first
TOP_PARTITIONS = 5


def _type_name(field_type: Any) -> str:
    """A Delta schema type as one string: ``long``, ``array<string>``, ``struct<a:int>``."""
    if isinstance(field_type, str):
        return field_type
    kind = field_type.get("type")
    if kind == "array":
        return f"array<{_type_name(field_type['elementType'])}>"
    if kind == "map":
        return f"map<{_type_name(field_type['keyType'])},{_type_name(field_type['valueType'])}>"
    if kind == "struct":
        inner = ",".join(f"{f['name']}:{_type_name(f['type'])}" for f in field_type["fields"])
        return f"struct<{inner}>"
    return str(kind)


def schema_columns(snapshot: Snapshot) -> list[dict[str, Any]]:
    """Top-level columns: name, Delta type, nullable, and whether it partitions the table. A
    ``metaData`` with an empty or absent ``schemaString`` (old writers) has none."""
    partitions = set(snapshot.partition_columns)
    return [
        {
            "name": f.name,
            "type": _type_name(f.type),
            "nullable": f.nullable,
            "partition": f.name in partitions,
        }
        for f in parse_schema(snapshot.metadata.schema_string)
    ]


def last_checkpoint(snapshot: Snapshot) -> dict[str, Any] | None:
    """The newest checkpoint the snapshot's listing found (None: the table has none)."""
    ref = snapshot.checkpoint
    if ref is None:
        return None
    return {
        "version": ref.version,
        "kind": ref.kind.value,
        "parts": len(ref.files),
        "sizeBytes": sum(f.size for f in ref.files),
        "commitsSince": snapshot.version - ref.version,
    }


def small_files(snapshot: Snapshot, below: int, top: int = TOP_PARTITIONS) -> dict[str, Any]:
    """Files strictly smaller than ``below``: count, bytes, and the partitions holding most."""
    files = snapshot.files()
    sizes = files.column("size")
    mask = pc.less(sizes, below)
    count = int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)
    total = int(pc.sum(pc.filter(sizes, mask)).as_py() or 0) if count else 0
    out: dict[str, Any] = {"below": below, "files": count, "bytes": total}
    if not snapshot.partition_columns:
        return out
    keys = [
        "/".join(f"{k}={'null' if v is None else v}" for k, v in values.items())
        for values in snapshot.raw_partition_values()
    ]
    grouped = (
        pa.table({"partition": keys, "size": sizes, "small": mask})
        .filter(mask)
        .group_by("partition")
        .aggregate([("size", "count"), ("size", "sum")])
        .to_pylist()
    )
    grouped.sort(key=lambda r: (-r["size_count"], -r["size_sum"], r["partition"]))
    out["partitions"] = len(grouped)
    out["top"] = [
        {"partition": r["partition"], "files": r["size_count"], "bytes": r["size_sum"]}
        for r in grouped[:top]
    ]
    return out
