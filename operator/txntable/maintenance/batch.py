"""What one OPTIMIZE batch reads and writes, apart from the run's control flow.

The live ``add`` actions of the bin inputs (what the removes copy), the partition predicate the
batch's transaction declares as read, Spark's ``operationMetrics``, and the guards checked before
a batch commits (schema unchanged, row counts agree with the inputs' statistics, or with their
footers where the statistics lack ``numRecords``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.model.actions import AddFile, RemoveFile
from txntable.engine.model.predicate_tree import And, Compare, IsNull, Or, Predicate
from txntable.engine.read.snapshot import Snapshot
from txntable.maintenance.planner import Bin


def operation_metrics(removes: Sequence[RemoveFile], adds: Sequence[AddFile]) -> dict[str, str]:
    """Spark's OPTIMIZE operationMetrics (string values, ``DeltaOperationMetrics.scala``)."""
    sizes = sorted(a.size for a in adds) or [0]

    def pct(q: float) -> int:
        return sizes[min(len(sizes) - 1, int(q * (len(sizes) - 1) + 0.5))]

    return {
        "numAddedFiles": str(len(adds)),
        "numRemovedFiles": str(len(removes)),
        "numAddedBytes": str(sum(a.size for a in adds)),
        "numRemovedBytes": str(sum(r.size or 0 for r in removes)),
        "minFileSize": str(sizes[0]),
        "p25FileSize": str(pct(0.25)),
        "p50FileSize": str(pct(0.5)),
        "p75FileSize": str(pct(0.75)),
        "maxFileSize": str(sizes[-1]),
        "numDeletionVectorsRemoved": str(sum(r.deletion_vector is not None for r in removes)),
    }


MAX_PREDICATE_PARTITIONS = 64


def read_predicate(
    where: str | None, partition_columns: Sequence[str], bins: Sequence[Bin]
) -> str | Predicate | None:
    """What the batch's transaction declares it read: only the partitions its bins touch (so a
    concurrent DELETE elsewhere is no conflict), or the run's predicate when there are many."""
    if not partition_columns:
        return where
    keys = {tuple(b.partition_values.get(c) for c in partition_columns) for b in bins}
    if not keys or len(keys) > MAX_PREDICATE_PARTITIONS:
        return where
    terms: list[Predicate] = []
    for key in sorted(keys, key=lambda k: tuple((v is not None, v or "") for v in k)):
        conjunct: Predicate | None = None
        for col, value in zip(partition_columns, key, strict=True):
            term: Predicate = IsNull(col) if value is None else Compare(col, "=", value)
            conjunct = term if conjunct is None else And(conjunct, term)
        assert conjunct is not None
        terms.append(conjunct)
    while len(terms) > 1:  # a balanced OR keeps evaluation shallow
        pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
        terms = [Or(p[0], p[1]) if len(p) == 2 else p[0] for p in pairs]
    return terms[0]


def expected_rows(
    live: Mapping[str, AddFile], paths: Sequence[str], row_counts: Mapping[str, int] | None = None
) -> int | None:
    """Rows of the inputs by their ``numRecords`` statistics (else ``row_counts``, read from
    their footers) less the rows their deletion vectors delete; None when any has neither."""
    total = 0
    for p in paths:
        add = live[p]
        try:
            records = json.loads(add.stats).get("numRecords") if add.stats else None
        except ValueError:
            records = None
        if not isinstance(records, int):
            records = (row_counts or {}).get(p)
        if not isinstance(records, int):
            return None
        total += records - (add.deletion_vector.cardinality if add.deletion_vector else 0)
    return total


def _dv_id(dv: Mapping[str, Any] | None) -> str | None:
    if dv is None:
        return None
    offset = dv.get("offset")
    suffix = f"@{offset}" if offset is not None else ""
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}{suffix}"


def inputs_unchanged(b: Bin, live: Mapping[str, AddFile]) -> bool:
    """Every input of ``b`` is still live with the deletion vector it was planned with (a
    concurrent DELETE that replaced a file's vector makes the rewrite stale)."""
    for index, path in enumerate(b.paths):
        add = live.get(path)
        if add is None:
            return False
        current = add.deletion_vector.unique_id if add.deletion_vector else None
        if current != _dv_id(b.deletion_vector(index)):
            return False
    return True


def schema_changed(planned: Snapshot, latest: Snapshot) -> bool:
    a, b = planned.metadata, latest.metadata
    return (
        a.schema_string != b.schema_string
        or list(a.partition_columns) != list(b.partition_columns)
        or a.configuration.get("delta.columnMapping.mode")
        != b.configuration.get("delta.columnMapping.mode")
    )


def live_adds(snapshot: Snapshot, paths: Sequence[str]) -> dict[str, AddFile]:
    """Live ``add`` actions (with their deletion vectors) for the given raw paths."""
    files = snapshot.files()
    if not paths or files.num_rows == 0:
        return {}
    mask = pc.is_in(files.column("path"), value_set=pa.array(list(paths), pa.string()))
    out: dict[str, AddFile] = {}
    for row in files.filter(mask).to_pylist():
        obj = {k: v for k, v in row.items() if v is not None}
        obj["partitionValues"] = dict(row.get("partitionValues") or [])
        if "tags" in obj:
            obj["tags"] = dict(obj["tags"])
        if "deletionVector" in obj:
            obj["deletionVector"] = {
                k: v for k, v in obj["deletionVector"].items() if v is not None
            }
        add = AddFile.from_json(obj)
        out[add.path] = add
    return out
