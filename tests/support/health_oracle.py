"""A table's health computed from a full ``Snapshot``: the reference ``observe_summary`` (the
controller's path, from its compact ``TableSummary``) is tested against, and the benchmark's
snapshot side. It lived in ``reconcile/health.py`` with no caller in the product."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine import Snapshot
from txntable.reconcile.health import TableHealth, _health, _reclaimable, _removals


def observe(snapshot: Snapshot, min_file_size: int, *, now_ms: int | None = None) -> TableHealth:
    """Health of ``snapshot``; files strictly smaller than ``min_file_size`` count as small."""
    files = snapshot.files(stats=False)
    sizes = files.column("size")
    small_mask = pc.less(sizes, min_file_size)
    small = int(pc.sum(pc.cast(small_mask, "int64")).as_py() or 0)
    small_bytes = int(pc.sum(pc.filter(sizes, small_mask)).as_py() or 0) if small else 0
    partitions, compactable = _partition_stats(snapshot, small_mask)
    return _health(
        version=snapshot.version,
        protocol=snapshot.protocol,
        metadata=snapshot.metadata,
        timestamp_ms=snapshot.timestamp_ms,
        checkpoint=snapshot.checkpoint,
        files=snapshot.num_files,
        size_bytes=snapshot.size_bytes,
        small_files=small,
        small_file_bytes=small_bytes,
        compactable_small_files=compactable,
        partitions=partitions,
        **_deletion_figures(snapshot, now_ms),
    )


def _deletion_figures(snapshot: Snapshot, now_ms: int | None = None) -> dict[str, int | None]:
    """Deletion-vector and VACUUM figures, column-wise over the snapshot's Arrow state."""
    dv = snapshot.files(stats=False).column("deletionVector")
    with_dv = len(dv) - dv.null_count
    deleted = 0
    if with_dv:
        deleted = int(pc.sum(pc.struct_field(dv, "cardinality")).as_py() or 0)
    tombstones = snapshot.tombstones(stats=False)
    return {
        "files_with_deletion_vectors": with_dv,
        "deleted_rows": deleted,
        "reclaimable_bytes": _reclaimable(
            snapshot.configuration,
            tombstones.column("deletionTimestamp"),
            tombstones.column("size"),
            now_ms,
        ),
        **_removals(snapshot.configuration, tombstones.column("deletionTimestamp"), now_ms),
    }


def _partition_stats(snapshot: Snapshot, small_mask: pa.ChunkedArray) -> tuple[int, int]:
    """Distinct partitions among live files, and the small files that share a partition with
    another small file (vectorised group-by)."""
    if snapshot.num_files == 0:
        return 0, 0
    small = pc.cast(small_mask, "int64")
    if not snapshot.partition_columns:
        total = int(pc.sum(small).as_py() or 0)
        return 1, total if total >= 2 else 0
    values = snapshot.files(stats=False).column("partitionValues").combine_chunks()
    by_name = {f.name: f.physical_name for f in snapshot.fields}
    columns = {
        f"p{i}": pc.map_lookup(values, pa.scalar(by_name.get(name, name)), "first")
        for i, name in enumerate(snapshot.partition_columns)
    }
    keys = list(columns)
    grouped = pa.table({**columns, "small": small}).group_by(keys).aggregate([("small", "sum")])
    sums = grouped.column("small_sum")
    mergeable = pc.sum(pc.if_else(pc.greater_equal(sums, 2), sums, 0)).as_py()
    return int(grouped.num_rows), int(mergeable or 0)
