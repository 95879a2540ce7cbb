"""Pure OPTIMIZE planning: which small files to rewrite together, per partition.

The planner sees only the live file list (Arrow rows in ``ADD_SCHEMA``) and a policy, and returns
the same plan for the same inputs: partitions in a fixed order, bins packed first-fit-decreasing
(size descending, then path) up to the target size, bins with fewer than ``min_input_files`` files
dropped (``packing``: the kernel the controller's plan in status packs with too). A partition that
is already compacted (a single file, or no file under the minimum size) yields nothing, so a
second run right after the first plans nothing. With Z-order columns every file of a partition
goes into one bin (the rows are re-clustered, not just concatenated), unless every file already
carries the Z-order tag for the same columns. Files with deletion vectors are candidates like the
others (their rewrite drops the deleted rows, so the vectors are purged), and one whose vector
hides at least ``dv_purge_ratio`` of its rows is rewritten whatever its size, alone if need be.
A file's rows are its ``numRecords`` statistic; where the ``add`` lacks it (a table written
without statistics, a checkpoint written without them) the caller passes the count from the
file's Parquet footer (``row_counts``), so every vector is judged on an exact count.

On a clustered table (``clustering`` feature, columns from its ``delta.clustering`` domain, see
``maintenance.clustering``) a partition's bin holds every file not yet clustered (no
``clusteringProvider``) plus the clustered ones under the minimum size and those due a
deletion-vector purge, and its rows are ordered by the Z-order key over the clustering columns.
Large clustered files are left alone, and a partition with nothing unclustered and nothing to purge
plans nothing, so a second run plans nothing. Files another clustering implementation wrote
(a ``clusteringProvider`` other than ``liquid``) are never rewritten (PROTOCOL.md: an
implementation re-clusters only its own files and unclustered ones).

With ``avoid_recent_writes_ms`` set, partitions other writers changed within that window are
deferred rather than planned (``plan_optimize(..., avoid=...)``, the partitions come from
``engine.read.activity``): a DELETE, UPDATE, MERGE or overwrite that keeps rewriting a partition
would likely remove our bin's inputs again before we commit, and the rewritten bytes would be
dropped. By default only writes that removed files count (``avoid_writes="removes"``): appends never
conflict with OPTIMIZE; ``"any"`` defers partitions with any commit in the window. The plan says
which partitions were deferred, why, and the bins and bytes they would have had.

The plan is also the dry-run output (``OptimizePlan.to_json``), and it is what the executors
(Arrow in-process, Spark tasks) run and the orchestrator commits in batches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.api.optimize_options import OptimizeOptions
from txntable.maintenance.clustering import LIQUID
from txntable.maintenance.errors import InvalidPolicyError
from txntable.maintenance.packing import bins_within, pack_partition, partition_order

#: Tag put on files written by a Z-order run; its value is the JSON list of columns.
ZORDER_TAG = "txntable.zOrderBy"


PartitionKey = tuple[str | None, ...]


@dataclass(frozen=True)
class Bin:
    """Files of one partition to rewrite together. ``paths`` are raw log paths (the ``add``'s
    string, verbatim), sorted; ``bin_id`` is a stable hash of them."""

    partition_values: dict[str, str | None]
    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    zorder: bool = False
    #: rows are ordered by the table's clustering columns, outputs get ``clusteringProvider``
    clustered: bool = False
    #: the deletion vector of each input as planned (``deletionVector`` JSON), aligned with paths
    deletion_vectors: tuple[dict[str, Any] | None, ...] = ()

    def deletion_vector(self, index: int) -> dict[str, Any] | None:
        return self.deletion_vectors[index] if self.deletion_vectors else None

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)

    @property
    def bin_id(self) -> str:
        digest = hashlib.sha1("\n".join(self.paths).encode("utf-8")).hexdigest()
        return digest[:16]

    def to_json(self) -> dict[str, Any]:
        return {
            "binId": self.bin_id,
            "partitionValues": self.partition_values,
            "numFiles": len(self.paths),
            "bytes": self.total_bytes,
            "zOrder": self.zorder,
            "clustered": self.clustered,
            "filesWithDeletionVectors": sum(dv is not None for dv in self.deletion_vectors),
            "files": list(self.paths),
        }


@dataclass(frozen=True)
class DeferredPartition:
    """A partition with work that the plan leaves alone because other writers are changing it."""

    partition_values: dict[str, str | None]
    reason: str
    bins: int
    bytes: int
    #: when the newest write that deferred it committed (epoch ms)
    last_write_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "partitionValues": self.partition_values,
            "reason": self.reason,
            "bins": self.bins,
            "bytes": self.bytes,
            "lastWriteMs": self.last_write_ms,
        }


@dataclass(frozen=True)
class Avoidance:
    """Partitions to defer (``PartitionKey`` in partition-column order -> why, and when the
    newest write was), as found in the log by the caller."""

    partitions: Mapping[PartitionKey, tuple[str, int | None]]
    #: what was read to decide, for the plan's JSON (e.g. ``RecentActivity.to_json`` summary)
    summary: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OptimizePlan:
    """What a run would do: ``bins`` to rewrite now, ``deferred`` bins over the run's byte limit
    (``max_bytes_per_run``)."""

    options: OptimizeOptions
    read_version: int
    bins: tuple[Bin, ...]
    deferred: tuple[Bin, ...] = ()
    partitions_considered: int = 0
    partitions_skipped: int = 0
    files_considered: int = 0
    files_with_deletion_vectors: int = 0
    notes: tuple[str, ...] = field(default=())
    #: the clustering columns of a clustered table (possibly empty); None: not clustered
    cluster_by: tuple[str, ...] | None = None
    #: partitions with work left alone because other writers changed them recently
    deferred_partitions: tuple[DeferredPartition, ...] = ()
    #: what the avoidance read from the log (None: the policy avoids nothing)
    activity: Mapping[str, Any] | None = None
    #: physical rows of the files whose ``add`` lacks ``numRecords``, from their Parquet
    #: footers (``plan_optimize(row_counts=...)``): the purge rule and the row-count guard use them
    row_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def input_bytes(self) -> int:
        return sum(b.total_bytes for b in self.bins)

    @property
    def input_files(self) -> int:
        return sum(len(b.paths) for b in self.bins)

    def batches(self) -> list[list[Bin]]:
        """The bins cut into commit batches of about ``options.partial_commit_size`` input bytes."""
        out: list[list[Bin]] = []
        current: list[Bin] = []
        size = 0
        for b in self.bins:
            if current and size + b.total_bytes > self.options.partial_commit_size:
                out.append(current)
                current, size = [], 0
            current.append(b)
            size += b.total_bytes
        if current:
            out.append(current)
        return out

    def to_json(self) -> dict[str, Any]:
        """The dry-run view: the settings (``OptimizeOptions.to_json``, with the minimum file
        size in effect), counts and every bin with its files."""
        return {
            "readVersion": self.read_version,
            "policy": {
                **self.options.to_json(),
                "minFileSize": self.options.effective_min_file_size,
            },
            "clusterBy": None if self.cluster_by is None else list(self.cluster_by),
            "partitionsConsidered": self.partitions_considered,
            "partitionsSkipped": self.partitions_skipped,
            "filesConsidered": self.files_considered,
            "filesWithDeletionVectors": self.files_with_deletion_vectors,
            "rowCountsFromFooters": len(self.row_counts),
            "numBins": len(self.bins),
            "numInputFiles": self.input_files,
            "numInputBytes": self.input_bytes,
            "deferredBins": len(self.deferred),
            "deferredBytes": sum(b.total_bytes for b in self.deferred),
            "bins": [b.to_json() for b in self.bins],
            "notes": list(self.notes),
            "deferredPartitions": [d.to_json() for d in self.deferred_partitions],
            "recentActivity": None if self.activity is None else dict(self.activity),
        }


@dataclass
class _File:
    path: str
    size: int
    tag: str | None
    dv: dict[str, Any] | None = None
    #: the deletion vector hides at least the policy's purge ratio of its rows
    purge: bool = False
    #: ``clusteringProvider`` of the add (None: not clustered)
    provider: str | None = None


def plan_optimize(
    files: pa.Table,
    partition_columns: Sequence[str],
    options: OptimizeOptions,
    read_version: int = -1,
    *,
    cluster_by: Sequence[str] | None = None,
    partition_keys: Mapping[str, str] | None = None,
    avoid: Avoidance | None = None,
    row_counts: Mapping[str, int] | None = None,
) -> OptimizePlan:
    """Plan bins over ``files`` (``ADD_SCHEMA`` rows already restricted to the partitions the
    policy's predicate selects, e.g. by ``Transaction.scan``). ``cluster_by``: the clustering
    columns of a clustered table (empty: clustered by nothing, plain compaction); None for a
    table that is not clustered. ``avoid``: partitions to defer (their bins are counted in
    ``deferred_partitions``, not planned). ``row_counts``: rows of files (by raw path) whose
    statistics lack ``numRecords``, read from their footers (``missing_row_counts``)."""
    if cluster_by is not None and options.z_order_by:
        raise InvalidPolicyError("a clustered table cannot be Z-ordered")
    counts = dict(row_counts or {})
    groups, dv_files = _group_by_partition(
        files, partition_columns, options.dv_purge_ratio, partition_keys, counts
    )
    foreign = 0
    if cluster_by is not None:  # never rewrite another clustering implementation's files
        for key, members in groups.items():
            kept = [f for f in members if f.provider in (None, LIQUID)]
            foreign += len(members) - len(kept)
            groups[key] = kept
    bins: list[Bin] = []
    skipped = 0
    avoided: list[DeferredPartition] = []
    hot = avoid.partitions if avoid is not None else {}
    for key in sorted(groups, key=partition_order):
        values = dict(zip(partition_columns, key, strict=True))
        if cluster_by:
            made = _plan_clustered(values, groups[key], options)
        else:
            made = _plan_partition(values, groups[key], options)
        if not made:
            skipped += 1
        elif key in hot:
            reason, last = hot[key]
            avoided.append(
                DeferredPartition(values, reason, len(made), sum(b.total_bytes for b in made), last)
            )
            continue
        bins.extend(made)
    chosen, deferred = _limit(bins, options.max_bytes_per_run)
    notes = _notes(
        bins=bins,
        chosen=chosen,
        deferred=deferred,
        counts=counts,
        cluster_by=cluster_by,
        foreign=foreign,
        avoid=avoid,
        avoided=avoided,
    )
    return OptimizePlan(
        options=options,
        read_version=read_version,
        bins=tuple(chosen),
        deferred=tuple(deferred),
        partitions_considered=len(groups),
        partitions_skipped=skipped,
        files_considered=int(files.num_rows),
        files_with_deletion_vectors=dv_files,
        notes=notes,
        cluster_by=None if cluster_by is None else tuple(cluster_by),
        deferred_partitions=tuple(avoided),
        activity=None if avoid is None else dict(avoid.summary),
        row_counts=counts,
    )


def _notes(
    *,
    bins: list[Bin],
    chosen: list[Bin],
    deferred: list[Bin],
    counts: Mapping[str, int],
    cluster_by: Sequence[str] | None,
    foreign: int,
    avoid: Avoidance | None,
    avoided: list[DeferredPartition],
) -> tuple[str, ...]:
    """What a reader of the plan should know beyond its bins: rewrites of deletion vectors,
    row counts read from footers, bins and partitions deferred, files clustering leaves alone."""
    notes = []
    rewritten_dvs = sum(dv is not None for b in bins for dv in b.deletion_vectors)
    if rewritten_dvs:
        notes.append(
            f"{rewritten_dvs} file(s) with deletion vectors are rewritten without deleted rows"
        )
    if counts:
        notes.append(
            f"{len(counts)} file(s) with deletion vectors lack numRecords in their statistics: "
            "their rows were counted from their Parquet footers"
        )
    if deferred:
        notes.append(f"{len(deferred)} bin(s) deferred to a later run by the max-bytes limit")
    if cluster_by:
        notes.append(
            f"clustering by {', '.join(cluster_by)}: {sum(len(b.paths) for b in chosen)} "
            "file(s) re-clustered; large clustered files are kept as they are"
        )
    if foreign:
        notes.append(f"{foreign} file(s) clustered by another implementation left as they are")
    if avoid is not None and avoid.summary.get("complete") is False:
        notes.append(
            f"recent writes read from the newest {avoid.summary.get('commitsRead')} commit(s) "
            "only: older commits inside the window were not looked at"
        )
    if avoided:
        notes.append(
            f"{len(avoided)} partition(s) deferred: other writers changed them recently "
            f"({sum(d.bins for d in avoided)} bin(s), {sum(d.bytes for d in avoided)} bytes)"
        )
    return tuple(notes)


def _group_by_partition(
    files: pa.Table,
    partition_columns: Sequence[str],
    purge_ratio: float,
    partition_keys: Mapping[str, str] | None = None,
    row_counts: Mapping[str, int] | None = None,
) -> tuple[dict[PartitionKey, list[_File]], int]:
    n = files.num_rows
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    dvs: list[dict[str, Any] | None] = (
        files.column("deletionVector").to_pylist()
        if "deletionVector" in files.column_names
        else [None] * n
    )
    stats = files.column("stats").to_pylist() if "stats" in files.column_names else [None] * n
    tags = _lookup(files, "tags", ZORDER_TAG) if n else []
    providers: list[str | None] = (
        files.column("clusteringProvider").to_pylist()
        if "clusteringProvider" in files.column_names
        else [None] * n
    )
    # partitionValues are keyed by physical names under column mapping (``partition_keys``)
    keys = partition_keys or {}
    columns = (
        [_lookup(files, "partitionValues", keys.get(c, c)) for c in partition_columns] if n else []
    )
    groups: dict[PartitionKey, list[_File]] = {}
    dv_files = 0
    for i in range(n):
        raw = dvs[i]
        dv = {k: v for k, v in raw.items() if v is not None} if raw else None
        purge = False
        if dv is not None:
            dv_files += 1
            records = _num_records(stats[i])
            if records is None and row_counts:
                records = row_counts.get(paths[i])
            deleted = int(dv.get("cardinality") or 0)
            purge = records is not None and records > 0 and deleted >= purge_ratio * records
        key = tuple(_null_if_empty(col[i]) for col in columns)
        groups.setdefault(key, []).append(
            _File(paths[i], int(sizes[i]), tags[i], dv, purge, providers[i] or None)
        )
    return groups, dv_files


def missing_row_counts(files: pa.Table) -> list[str]:
    """Raw paths of the files with a deletion vector whose statistics lack ``numRecords``: the
    purge rule needs their row counts from elsewhere (their Parquet footers)."""
    if files.num_rows == 0 or "deletionVector" not in files.column_names:
        return []
    paths = files.column("path").to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    stats = (
        files.column("stats").to_pylist() if "stats" in files.column_names else [None] * len(paths)
    )
    return [
        p for p, dv, st in zip(paths, dvs, stats, strict=True) if dv and _num_records(st) is None
    ]


def _num_records(stats: str | None) -> int | None:
    try:
        value = json.loads(stats).get("numRecords") if stats else None
    except ValueError:
        return None
    return value if isinstance(value, int) else None


def _lookup(files: pa.Table, column: str, key: str) -> list[str | None]:
    if column not in files.column_names:
        return [None] * files.num_rows
    arr = files.column(column).combine_chunks()
    if isinstance(arr, pa.ChunkedArray):  # zero chunks
        arr = pa.array([], arr.type)
    return list(pc.map_lookup(arr, pa.scalar(key), "first").to_pylist())


def _null_if_empty(value: str | None) -> str | None:
    return None if value is None or value == "" else value


def _plan_partition(
    values: dict[str, str | None], files: list[_File], options: OptimizeOptions
) -> list[Bin]:
    purge = [f for f in files if f.purge]
    if len(files) < 2 and not purge:
        return []  # already compacted (or empty): one file is as good as it gets
    if options.z_order_by:
        wanted = json.dumps(list(options.z_order_by), separators=(",", ":"))
        if all(f.tag == wanted for f in files):
            return []  # every file already written by a Z-order run on these columns
        return [_make_bin(values, files, zorder=True)]
    bins = pack_partition(
        [f.size for f in files],
        options,
        purge=[f.purge for f in files],
        ties=[f.path for f in files],
    )
    return [_make_bin(values, [files[i] for i in members], zorder=False) for members in bins]


def _plan_clustered(
    values: dict[str, str | None], files: list[_File], options: OptimizeOptions
) -> list[Bin]:
    """One bin of the files to (re-)cluster: unclustered ones, small clustered ones and those
    due a deletion-vector purge; nothing when every file is clustered and none needs a purge
    (re-clustering large files would only churn)."""
    if not any(f.provider is None or f.purge for f in files):
        return []
    limit = options.effective_min_file_size
    chosen = [f for f in files if f.provider is None or f.size < limit or f.purge]
    if len(chosen) < options.min_input_files and not any(f.purge for f in chosen):
        return []
    return [_make_bin(values, chosen, zorder=False, clustered=True)]


def _make_bin(
    values: dict[str, str | None], files: list[_File], zorder: bool, clustered: bool = False
) -> Bin:
    ordered = sorted(files, key=lambda f: f.path)
    return Bin(
        partition_values=dict(values),
        paths=tuple(f.path for f in ordered),
        sizes=tuple(f.size for f in ordered),
        zorder=zorder,
        clustered=clustered,
        deletion_vectors=tuple(f.dv for f in ordered) if any(f.dv for f in ordered) else (),
    )


def _limit(bins: list[Bin], limit: int | None) -> tuple[list[Bin], list[Bin]]:
    """The bins a run takes under ``limit`` bytes and those it defers (``packing.bins_within``)."""
    taken = bins_within([b.total_bytes for b in bins], limit)
    return bins[:taken], bins[taken:]
