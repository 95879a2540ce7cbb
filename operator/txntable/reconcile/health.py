"""A table's health, from a snapshot or from the compact summary the controller keeps.

The controller holds an ``engine.read.summary.TableSummary`` per table (a few bytes per file),
advances it by the new commits each tick (engine I/O, in the handlers) and hands it to
``observe_summary``. The same figures computed from a full ``Snapshot`` are the tests' reference
(``tests/support/health_oracle.py``), not a second product path. Everything below is arithmetic
over Arrow columns, so one tick costs a listing plus the new commits, never a replay.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine import (
    CheckpointRef,
    InvalidActionError,
    InvalidArgumentError,
    Metadata,
    Protocol,
    TableSummary,
    UnsupportedFeatureError,
    check_maintainable,
    check_writable,
    retention,
)


@dataclass(frozen=True, slots=True)
class TableHealth:
    """What the log says about a table at one version."""

    version: int
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...]
    writer_features: tuple[str, ...]
    files: int
    size_bytes: int
    small_files: int
    small_file_bytes: int
    #: small files in partitions holding at least two of them (what compaction can merge)
    compactable_small_files: int
    partitions: int
    last_commit_time: datetime
    checkpoint_version: int | None
    checkpoint_time: datetime | None
    commits_since_checkpoint: int
    #: OPTIMIZE can rewrite the table's files (``check_writable`` for a commit that changes no
    #: row); else why not
    writable: bool
    unwritable_reason: str | None = None
    #: checkpoints, log cleanup and VACUUM can run (every feature known to this engine,
    #: ``check_maintainable``); else why not. A table may be maintainable but not writable
    #: (shredded variants, an unmet Iceberg compatibility rule), never the other way round.
    maintainable: bool = True
    unmaintainable_reason: str | None = None
    #: live files carrying a deletion vector, and the rows those vectors delete
    files_with_deletion_vectors: int = 0
    deleted_rows: int = 0
    #: bytes of removed files whose tombstones are older than the table's
    #: delta.deletedFileRetentionDuration: what VACUUM would reclaim (a lower bound: files never
    #: committed, and tombstones already expired from checkpoints, are not known to the log)
    reclaimable_bytes: int = 0
    #: the table's delta.deletedFileRetentionDuration (None: the property is broken) and the
    #: newest deletionTimestamp among the log's tombstones (None: there are none; one without a
    #: timestamp counts as now): what a VACUUM since then could not have reclaimed yet
    file_retention_ms: int | None = None
    newest_removal_ms: int | None = None

    @property
    def small_file_percent(self) -> float:
        return 100.0 * self.small_files / self.files if self.files else 0.0


def observe_summary(
    summary: TableSummary, min_file_size: int, *, now_ms: int | None = None
) -> TableHealth:
    """Health from a ``TableSummary``: the figures of the table at the summary's version
    (``now_ms``: the clock for reclaimable tombstones, default now)."""
    key = ("file figures", min_file_size)
    figures = summary.derived.get(key)
    if not isinstance(figures, _FileFigures):
        figures = summary.derived[key] = _file_figures(summary, min_file_size)
    tombs = summary.tombstones
    return _health(
        version=summary.version,
        protocol=summary.protocol,
        metadata=summary.metadata,
        timestamp_ms=summary.timestamp_ms,
        checkpoint=summary.checkpoint,
        files=summary.num_files,
        size_bytes=summary.size_bytes,
        small_files=figures.small,
        small_file_bytes=figures.small_bytes,
        compactable_small_files=figures.compactable,
        partitions=figures.partitions,
        files_with_deletion_vectors=figures.dv_files,
        deleted_rows=figures.deleted_rows,
        reclaimable_bytes=_reclaimable(
            summary.configuration,
            tombs.column("deletion_timestamp"),
            tombs.column("size"),
            now_ms,
        ),
        **_removals(summary.configuration, tombs.column("deletion_timestamp"), now_ms),
    )


@dataclass(frozen=True, slots=True)
class _FileFigures:
    """What ``observe_summary`` reads from a summary's live files, for one minimum size."""

    small: int
    small_bytes: int
    partitions: int
    compactable: int
    dv_files: int
    deleted_rows: int


def _file_figures(summary: TableSummary, min_file_size: int) -> _FileFigures:
    files = summary.files
    sizes = files.column("size")
    small_mask = pc.less(sizes, min_file_size)
    small = int(pc.sum(pc.cast(small_mask, "int64")).as_py() or 0)
    small_bytes = int(pc.sum(pc.filter(sizes, small_mask)).as_py() or 0) if small else 0
    partitions, compactable = 0, 0
    if summary.num_files:
        if not summary.partition_columns:
            partitions, compactable = 1, small if small >= 2 else 0
        else:
            grouped = (
                pa.table({"p": files.column("partition"), "small": pc.cast(small_mask, "int64")})
                .group_by("p")
                .aggregate([("small", "sum")])
            )
            sums = grouped.column("small_sum")
            merged = pc.sum(pc.if_else(pc.greater_equal(sums, 2), sums, 0)).as_py()
            partitions, compactable = int(grouped.num_rows), int(merged or 0)
    dv_rows = files.column("dv_rows")
    return _FileFigures(
        small,
        small_bytes,
        partitions,
        compactable,
        len(dv_rows) - dv_rows.null_count,
        int(pc.sum(dv_rows).as_py() or 0),
    )


def _health(
    *,
    protocol: Protocol,
    metadata: Metadata,
    timestamp_ms: int,
    checkpoint: CheckpointRef | None,
    version: int,
    **figures: Any,
) -> TableHealth:
    """The protocol, writability and checkpoint parts around ``figures`` (also the snapshot
    reference's, in the tests)."""
    writable, reason = True, None
    try:
        check_writable(protocol, metadata, rows_unchanged=True)
    except (UnsupportedFeatureError, InvalidActionError) as exc:
        writable, reason = False, str(exc)
    maintainable, refusal = True, None
    try:
        check_maintainable(protocol, "maintenance")
    except UnsupportedFeatureError as exc:
        maintainable, refusal = False, str(exc)
    since = version - checkpoint.version if checkpoint is not None else version + 1
    return TableHealth(
        version=version,
        min_reader_version=protocol.min_reader_version,
        min_writer_version=protocol.min_writer_version,
        reader_features=tuple(protocol.reader_features or ()),
        writer_features=tuple(protocol.writer_features or ()),
        last_commit_time=datetime.fromtimestamp(timestamp_ms / 1000, UTC),
        checkpoint_version=checkpoint.version if checkpoint is not None else None,
        checkpoint_time=(
            datetime.fromtimestamp(checkpoint.files[0].mtime_ms / 1000, UTC) if checkpoint else None
        ),
        commits_since_checkpoint=since,
        writable=writable,
        unwritable_reason=reason,
        maintainable=maintainable,
        unmaintainable_reason=refusal,
        **figures,
    )


def _removals(
    configuration: Mapping[str, str], deletion_timestamps: pa.ChunkedArray, now_ms: int | None
) -> dict[str, int | None]:
    """The file retention and the newest tombstone's deletionTimestamp (``TableHealth``)."""
    try:
        keep_ms = retention.duration_ms(
            configuration,
            retention.DELETED_FILE_RETENTION,
            retention.DEFAULT_DELETED_FILE_RETENTION_MS,
        )
    except InvalidArgumentError:
        keep_ms = None
    newest = None
    if len(deletion_timestamps):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        newest = int(pc.max(pc.fill_null(deletion_timestamps, now)).as_py())
    return {"file_retention_ms": keep_ms, "newest_removal_ms": newest}


def swept_before(keep_ms: int | None, vacuum_retention_s: int | None, last: datetime) -> int | None:
    """The deletionTimestamp (ms) before which every removed file was past the retention of a
    VACUUM that started at ``last``, with the table's ``keep_ms`` and a VACUUM ``retention`` of
    its own (the longer wins): that VACUUM deleted those files, though their tombstones stay in
    the log until a checkpoint expires them (PROTOCOL.md, "Add File and Remove File"). None
    when the table's retention is unknown.

    Exact, with no slack: ``last`` is when the run started (the API server's clock), and the
    VACUUM compares each deletionTimestamp with its own clock later, so it deleted at least
    these. An hour of slack made every VACUUM count the hour of removals before its cutoff as
    still reclaimable, and a policy whose ``interval`` is shorter than that vacuumed again at
    every interval for nothing. What this leaves out: a file whose remove a writer with a slow
    clock stamped before the cutoff in a commit still inside the retention, which VACUUM kept
    (``engine.vacuum``); the next VACUUM deletes it."""
    if keep_ms is None:
        return None
    keep = max(timedelta(milliseconds=keep_ms), timedelta(seconds=vacuum_retention_s or 0))
    return int((last - keep).timestamp() * 1000)


def without_swept(
    health: TableHealth, summary: TableSummary, swept_before_ms: int, *, now_ms: int | None = None
) -> TableHealth:
    """``health`` with the files the last VACUUM already deleted (tombstones stamped before
    ``swept_before_ms``, see ``swept_before``) taken out of ``reclaimable_bytes``, so the figure
    (and the alert on it) falls when a VACUUM ran, not when a checkpoint drops the tombstones."""
    tombs = summary.tombstones
    reclaimable = _reclaimable(
        summary.configuration,
        tombs.column("deletion_timestamp"),
        tombs.column("size"),
        now_ms,
        swept_before_ms=swept_before_ms,
    )
    return replace(health, reclaimable_bytes=reclaimable)


def _reclaimable(
    configuration: Mapping[str, str],
    deletion_timestamps: pa.ChunkedArray,
    sizes: pa.ChunkedArray,
    now_ms: int | None,
    *,
    swept_before_ms: int | None = None,
) -> int:
    """Bytes of tombstones older than the table's file retention (what VACUUM may delete), less
    those stamped before ``swept_before_ms`` (deleted by the last VACUUM)."""
    if not len(sizes):
        return 0
    try:
        keep_ms = retention.duration_ms(
            configuration,
            retention.DELETED_FILE_RETENTION,
            retention.DEFAULT_DELETED_FILE_RETENTION_MS,
        )
    except InvalidArgumentError:
        return 0  # a broken property: VACUUM refuses it too, so nothing is reclaimable
    if keep_ms is None:
        return 0
    now = int(time.time() * 1000) if now_ms is None else now_ms
    stamps = pc.fill_null(deletion_timestamps, now)
    old = pc.less(stamps, now - keep_ms)
    if swept_before_ms is not None:
        old = pc.and_(old, pc.greater_equal(stamps, swept_before_ms))
    return int(pc.sum(pc.filter(sizes, old)).as_py() or 0)
