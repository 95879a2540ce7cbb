"""What the controller keeps of a table between ticks: a few bytes per file, not a snapshot.

A ``Snapshot`` of a 100,000-file table holds every ``add`` with its statistics JSON (~180 MB in
the controller); a controller watching a thousand tables cannot keep one each. Its decisions
need far less: how many live files of which size sit in which partition, how many rows deletion
vectors hide, which tombstones VACUUM could reclaim, the protocol and metadata, and where the log
stands. ``TableSummary`` keeps exactly that, column-wise:

* per live file: a 64-bit hash of its reconciliation key (path plus deletion-vector id), its
  size, a partition id and its deletion vector's cardinality (null: no vector), 28 bytes;
* per tombstone: the key hash, the deletion timestamp and the size;
* the partition value tuples the ids stand for, protocol, metadata, checkpoint, version.

It is built from one full snapshot load, after which the snapshot is dropped, and ``advance``
reads only the commit files after its version and folds their actions with ``state.fold``'s own
``ActionFold``: an ``add`` replaces its key and clears its tombstone, a ``remove`` drops its key
and records the tombstone. A remove is matched by key, so its own size and partition values are
never needed. What cannot be folded this way is reloaded from a full snapshot: commits cleaned
up before they were seen (a version gap), a long replay when a newer checkpoint exists (as
``Snapshot.refresh`` does), and a metadata change that moves the partition columns.

Key hashes are Python's 64-bit string hashes, valid inside one process (a summary is never
stored); two live keys would have to collide for a figure to be off (odds ~1e-10 at 100,000
files).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import LogFileGoneError, VersionGapError
from txntable.engine.model.actions import CommitInfo, Metadata, Protocol
from txntable.engine.model.features import check_readable
from txntable.engine.model.schema import parse_schema
from txntable.engine.read.segment import CheckpointRef, list_commits_after
from txntable.engine.read.snapshot import _REFRESH_REPLAY_LIMIT, Snapshot, read_commits
from txntable.engine.read.state import ActionFold, key_column
from txntable.engine.storage.base import Storage

#: Columns of ``TableSummary.files``: one row per live file.
FILE_SCHEMA = pa.schema(
    [
        ("key", pa.int64()),
        ("size", pa.int64()),
        ("partition", pa.int32()),
        ("dv_rows", pa.int64()),  # the deletion vector's cardinality; null: no vector
    ]
)
#: Columns of ``TableSummary.tombstones``: one row per remove still in the state.
TOMBSTONE_SCHEMA = pa.schema(
    [("key", pa.int64()), ("deletion_timestamp", pa.int64()), ("size", pa.int64())]
)
#: Chunks a column may collect from appends before it is made contiguous again.
_MAX_CHUNKS = 16
#: Partition tuples kept before those without live files are dropped (when they are most).
_KEEP_PARTITIONS = 1024
#: Rows turned into Python objects at a time while a summary is built.
_SLICE = 8192

PartitionKey = tuple[str | None, ...]


@dataclass(frozen=True)
class TableSummary:
    """The figures of a table at ``version``, kept small enough for thousands of tables."""

    version: int
    protocol: Protocol
    metadata: Metadata
    #: the commit timestamp of ``version`` (in-commit timestamp when enabled), as ``Snapshot``
    timestamp_ms: int
    checkpoint: CheckpointRef | None
    files: pa.Table
    tombstones: pa.Table
    #: partition value tuples (raw log strings, in ``metadata.partition_columns`` order) by id
    partitions: tuple[PartitionKey, ...]
    _partition_ids: dict[PartitionKey, int] = field(repr=False, compare=False)
    #: figures a caller derived from this version's files, kept with them: an idle table's
    #: summary is the same object tick after tick (``advance`` returns it), so its file
    #: figures are computed once per version, not at every observation. Not copied by
    #: ``replace``: a new summary starts empty.
    derived: dict[object, object] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    # -- building --------------------------------------------------------------------------
    @classmethod
    def load(cls, storage: Storage) -> TableSummary:
        """Load the latest snapshot without statistics, keep its summary, let it go."""
        return cls.from_snapshot(Snapshot.load(storage, stats=False))

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> TableSummary:
        files = snapshot.files(stats=False)
        partitions, ids = _partition_ids(snapshot, files)
        dv = files.column("deletionVector")
        has_dv = pc.is_valid(dv)
        dv_rows = pc.if_else(
            has_dv, pc.fill_null(pc.struct_field(dv, "cardinality"), 0), pa.scalar(None, pa.int64())
        )
        summary_files = pa.table(
            [_hash_keys(files), files.column("size"), ids, dv_rows], schema=FILE_SCHEMA
        )
        tombs = snapshot.tombstones(stats=False)
        summary_tombs = pa.table(
            [_hash_keys(tombs), tombs.column("deletionTimestamp"), tombs.column("size")],
            schema=TOMBSTONE_SCHEMA,
        )
        return cls(
            version=snapshot.version,
            protocol=snapshot.protocol,
            metadata=snapshot.metadata,
            timestamp_ms=snapshot.timestamp_ms,
            checkpoint=snapshot.checkpoint,
            files=summary_files.combine_chunks(),
            tombstones=summary_tombs.combine_chunks(),
            partitions=tuple(partitions),
            _partition_ids={p: i for i, p in enumerate(partitions)},
        )

    def advance(
        self, storage: Storage, *, reload: Callable[[Storage], TableSummary] | None = None
    ) -> TableSummary:
        """The summary at the latest version: the new commits folded in, or a full reload
        when they cannot be (see the module docstring), through ``reload`` when given (the
        controller bounds how many full loads run at once). ``self`` is left unchanged."""
        load = reload or TableSummary.load
        try:
            commits, checkpoint = list_commits_after(storage, self.version)
        except VersionGapError:
            return load(storage)  # cleanup removed commits this one has not seen
        if not commits:
            if checkpoint is not None and checkpoint != self.checkpoint:
                return replace(self, checkpoint=checkpoint)
            return self
        if checkpoint is not None and len(commits) > _REFRESH_REPLAY_LIMIT:
            return load(storage)  # a newer checkpoint is cheaper than replay
        try:
            parsed = read_commits(storage, commits)
        except LogFileGoneError:
            return load(storage)  # cleanup deleted commits after the listing
        folded = ActionFold(self.protocol, self.metadata)
        for _, actions in parsed:
            folded.apply(actions)
        physical = _physical_partition_names(self.metadata)
        if any(_physical_partition_names(m) != physical for m in folded.metadata_changes):
            return load(storage)
        # the fold starts from this summary's protocol and metadata: they are never None
        protocol = folded.protocol or self.protocol
        metadata = folded.metadata or self.metadata
        check_readable(protocol)
        timestamp = commits[-1].file.mtime_ms
        if _ict_enabled(metadata):
            ict = next(
                (
                    a.in_commit_timestamp
                    for a in parsed[-1][1]
                    if isinstance(a, CommitInfo) and a.in_commit_timestamp is not None
                ),
                None,
            )
            timestamp = ict if ict is not None else timestamp
        files, tombstones, partitions, ids = _fold_files(self, folded, physical)
        return TableSummary(
            version=commits[-1].version,
            protocol=protocol,
            metadata=metadata,
            timestamp_ms=timestamp,
            checkpoint=checkpoint or self.checkpoint,
            files=files,
            tombstones=tombstones,
            partitions=partitions,
            _partition_ids=ids,
        )

    # -- figures ---------------------------------------------------------------------------
    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    @property
    def size_bytes(self) -> int:
        return int(pc.sum(self.files.column("size")).as_py() or 0)

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint.version if self.checkpoint else None

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.metadata.configuration)

    @property
    def nbytes(self) -> int:
        """Bytes of Arrow memory the summary holds (its Python objects aside)."""
        return int(self.files.nbytes + self.tombstones.nbytes)


def _fold_files(
    base: TableSummary, folded: ActionFold, physical: tuple[str, ...]
) -> tuple[pa.Table, pa.Table, tuple[PartitionKey, ...], dict[PartitionKey, int]]:
    """``base``'s files, tombstones and partitions (tuples, ids) with the folded file actions
    applied (a remove is matched by its key hash alone, see the module docstring)."""
    touched = [hash(k) for k in folded.touched()]
    files, tombs = base.files, base.tombstones
    if touched:
        value_set = pa.array(touched, pa.int64())
        files = _drop(files, value_set)
        tombs = _drop(tombs, value_set)
    partitions, ids = base.partitions, base._partition_ids
    part_of: list[int] = []
    for add in folded.adds.values():
        values = tuple(add.partition_values.get(name) for name in physical)
        pid = ids.get(values)
        if pid is None:
            if ids is base._partition_ids:
                ids = dict(ids)
            pid = ids[values] = len(ids)
            partitions = (*partitions, values)
        part_of.append(pid)
    adds = list(folded.adds.values())
    new_files = pa.table(
        [
            pa.array([hash(k) for k in folded.adds], pa.int64()),
            pa.array([a.size for a in adds], pa.int64()),
            pa.array(part_of, pa.int32()),
            pa.array(
                [a.deletion_vector.cardinality if a.deletion_vector else None for a in adds],
                pa.int64(),
            ),
        ],
        schema=FILE_SCHEMA,
    )
    removes = list(folded.removes.values())
    new_tombs = pa.table(
        [
            pa.array([hash(k) for k in folded.removes], pa.int64()),
            pa.array([r.deletion_timestamp for r in removes], pa.int64()),
            pa.array([r.size for r in removes], pa.int64()),
        ],
        schema=TOMBSTONE_SCHEMA,
    )
    files = _concat(files, new_files)
    if len(partitions) > _KEEP_PARTITIONS and new_files.num_rows:
        compacted = _forget_empty_partitions(files, partitions)
        if compacted is not None:
            files, partitions = compacted
            ids = {p: i for i, p in enumerate(partitions)}
    return files, _concat(tombs, new_tombs), partitions, ids


def _forget_empty_partitions(
    files: pa.Table, partitions: tuple[PartitionKey, ...]
) -> tuple[pa.Table, tuple[PartitionKey, ...]] | None:
    """The files renumbered over only the partition tuples some live file still uses, when
    those are under half (a table partitioned by hour whose old partitions are deleted would
    otherwise grow the list for as long as the controller runs); ``None``: keep them all."""
    column = files.column("partition")
    live = pc.unique(column).sort()
    if 2 * len(live) > len(partitions):
        return None
    kept = tuple(partitions[i] for i in live.to_pylist())
    renumbered = pc.cast(pc.index_in(column, value_set=live), pa.int32())
    files = files.set_column(files.schema.get_field_index("partition"), "partition", renumbered)
    return files, kept


def _hash_keys(table: pa.Table) -> pa.Array:
    """64-bit hashes of the rows' keys, a slice at a time (few Python strings alive at once)."""
    keys = key_column(table)
    hashes: list[int] = []
    for start in range(0, len(keys), _SLICE):
        hashes += map(hash, keys.slice(start, _SLICE).to_pylist())
    return pa.array(hashes, pa.int64())


def _physical_partition_names(metadata: Metadata) -> tuple[str, ...]:
    if not metadata.partition_columns:
        return ()
    by_name = {f.name: f.physical_name for f in parse_schema(metadata.schema_string)}
    return tuple(by_name.get(name, name) for name in metadata.partition_columns)


def _partition_ids(snapshot: Snapshot, files: pa.Table) -> tuple[list[PartitionKey], pa.Array]:
    """The distinct partition value tuples of the live files, and each file's index into them.
    Values are looked up by physical name, first match, as ``reconcile.health`` groups them."""
    physical = _physical_partition_names(snapshot.metadata)
    if not physical or files.num_rows == 0:
        partitions: list[PartitionKey] = [()] if files.num_rows else []
        return partitions, pa.array([0] * files.num_rows, pa.int32())
    values = files.column("partitionValues").combine_chunks()
    columns = [pc.map_lookup(values, pa.scalar(p), "first") for p in physical]
    ids: dict[PartitionKey, int] = {}
    out: list[int] = []
    for start in range(0, files.num_rows, _SLICE):
        rows = zip(*(c.slice(start, _SLICE).to_pylist() for c in columns), strict=True)
        out += [ids.setdefault(row, len(ids)) for row in rows]
    return list(ids), pa.array(out, pa.int32())


def _drop(table: pa.Table, keys: pa.Array) -> pa.Table:
    if not table.num_rows:
        return table
    hit = pc.is_in(table.column("key"), value_set=keys)
    if not pc.any(hit).as_py():
        return table
    return table.filter(pc.invert(hit))


def _concat(a: pa.Table, b: pa.Table) -> pa.Table:
    if b.num_rows == 0:
        return a
    if a.num_rows == 0:
        return b
    out = pa.concat_tables([a, b])
    return out.combine_chunks() if out.column(0).num_chunks > _MAX_CHUNKS else out


def _ict_enabled(metadata: Metadata) -> bool:
    return metadata.configuration.get("delta.enableInCommitTimestamps", "").lower() == "true"
