"""The planner's input built by hand: AddFile rows (ADD_SCHEMA) from short dicts."""

from __future__ import annotations

import pyarrow as pa

from txntable.engine.read.state import ADD_SCHEMA

MB = 1024 * 1024


def files_table(rows: list[dict]) -> pa.Table:
    """ADD_SCHEMA rows from short dicts: path, size, part (dict), dv (bool), tags."""
    out = []
    for r in rows:
        out.append(
            {
                "path": r["path"],
                "partitionValues": list((r.get("part") or {}).items()),
                "size": r["size"],
                "modificationTime": 0,
                "dataChange": True,
                "stats": r.get("stats"),
                "tags": list(r["tags"].items()) if r.get("tags") else None,
                "deletionVector": (
                    {
                        "storageType": "u",
                        "pathOrInlineDv": "ab",
                        "offset": 1,
                        "sizeInBytes": 10,
                        "cardinality": int(r["dv"]),
                        "maxRowIndex": None,
                    }
                    if r.get("dv")
                    else None
                ),
                "baseRowId": None,
                "defaultRowCommitVersion": None,
                "clusteringProvider": None,
            }
        )
    return pa.Table.from_pylist(out, schema=ADD_SCHEMA)
