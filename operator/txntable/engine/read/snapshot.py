"""A table at one version: load it, refresh it incrementally, and ask it questions.

Loading reads the newest usable checkpoint column-wise and folds in the commits after it;
refreshing lists only the commits after the snapshot's version and folds them into the existing
Arrow state (or restarts from a newer checkpoint when that is cheaper), which is what lets the
controller tail a table's log every few seconds without replaying it.

The statistics of the checkpoint's files (most of its bytes, and most of a loaded snapshot's
memory) are read only when something asks for them: listing files, sizes and partitions never
does, planning and writing a checkpoint do (``files()``, ``state``); ``late_stats`` reads them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import (
    CorruptLogError,
    EngineError,
    LogFileGoneError,
    TruncatedLogError,
    VersionGapError,
)
from txntable.engine.model.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    parse_commit,
)
from txntable.engine.model.features import check_readable
from txntable.engine.model.schema import (
    Field,
    parse_partition_column,
    parse_schema,
    to_arrow_schema,
)
from txntable.engine.read.checkpoint_read import read_checkpoint
from txntable.engine.read.late_stats import LateStats, fill_stats
from txntable.engine.read.segment import (
    CheckpointRef,
    Commit,
    LogSegment,
    build_segment,
    list_commits_after,
)
from txntable.engine.read.state import TableState, fold_keeping
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.storage.paths import LOG_DIR, commit_name, decode_path, has_scheme
from txntable.engine.testhooks import pause_point

log = logging.getLogger(__name__)

_PARALLEL_READS = 16
_REFRESH_REPLAY_LIMIT = 100
#: fresh listings a load takes when log cleanup deleted what the previous listing named; each
#: finds the newer checkpoint cleanup keeps, so one is usually enough, and a log that really
#: has a gap fails after these few listings
RELISTS_AFTER_CLEANUP = 4


def read_commits(storage: Storage, commits: Sequence[Commit]) -> list[tuple[int, list[Action]]]:
    """Parse commit files, in order. Object-store reads are slow, so many commits are fetched by a
    thread pool; parsing stays on this thread (it holds the GIL: parsing in the pool only added
    contention). Local disk is fast enough to read serially."""

    def fetch(commit: Commit) -> bytes:
        try:
            return storage.read_log(commit.file.name)
        except FileNotFoundError as exc:
            raise LogFileGoneError(
                f"commit {commit.file.name} of {storage.root_uri} vanished while reading the log"
            ) from exc

    def parse(commit: Commit, data: bytes) -> tuple[int, list[Action]]:
        return commit.version, parse_commit(data, source=f"{LOG_DIR}/{commit.file.name}")

    if len(commits) < _PARALLEL_READS or isinstance(storage, LocalStorage):
        return [parse(c, fetch(c)) for c in commits]
    with ThreadPoolExecutor(max_workers=min(16, (os.cpu_count() or 2) * 4)) as pool:
        return [parse(c, data) for c, data in zip(commits, pool.map(fetch, commits), strict=True)]


class Snapshot:
    """An immutable view of a table at ``version``."""

    def __init__(
        self,
        storage: Storage,
        state: TableState,
        timestamp_ms: int,
        checkpoint: CheckpointRef | None = None,
        *,
        has_stats: bool = True,
        late: LateStats | None = None,
    ) -> None:
        check_readable(state.protocol)
        #: False when loaded with ``stats=False``: files from the checkpoint lack statistics
        self.has_stats = has_stats
        self._storage = storage
        self._state = state
        self._late = late if late is not None and any(late.rows) else None
        self._filling = threading.Lock()
        self.timestamp_ms = timestamp_ms
        #: the newest complete checkpoint at or before ``version`` that this snapshot knows of
        self.checkpoint = checkpoint
        self._fields: list[Field] | None = None

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def load(
        cls, storage: Storage, version: int | None = None, *, stats: bool | None = None
    ) -> Snapshot:
        """Load ``version`` (latest when ``None``).

        The statistics (and tags) of the checkpoint's files are read when first asked for
        (``files()``, ``state``), by default; ``stats=True`` reads them now, for a caller that
        needs them at once (one read of the checkpoint instead of two). ``stats=False`` never
        reads them, for readers that never look at them (the controller's ``TableSummary``):
        such a snapshot says so in ``has_stats`` and must not be written from.

        A load that loses a race with log cleanup lists again, up to ``RELISTS_AFTER_CLEANUP``
        times, then fails with the last error: cleanup deleted a commit or checkpoint file the
        listing named before it was read, or deleted files while the listing was taken (a
        listing is no snapshot of the directory: it then shows a gap in the commits, or commits
        without the checkpoint they start from). The fresh listing finds the newer checkpoint
        cleanup keeps. A checkpoint that cannot be read (truncated, corrupt) is passed over for
        an older one when the commits after that one are all there, as Delta Spark does."""
        relists = 0
        while True:
            try:
                return cls._load_listed(storage, version, stats)
            except (LogFileGoneError, VersionGapError, TruncatedLogError) as exc:
                if relists >= RELISTS_AFTER_CLEANUP:
                    raise
                relists += 1
                log.info(
                    "loading %s lost a race with log cleanup (%s): listing the log again",
                    storage.root_uri,
                    exc,
                )

    @classmethod
    def _load_listed(cls, storage: Storage, version: int | None, stats: bool | None) -> Snapshot:
        """One listing and the reads of what it named."""
        segment = build_segment(storage, version)
        pause_point("snapshot:listed")
        while True:
            try:
                base = cls._read_base(storage, segment, stats)
            except FileNotFoundError as exc:
                assert segment.checkpoint is not None
                raise LogFileGoneError(
                    f"the checkpoint at version {segment.checkpoint.version} of "
                    f"{storage.root_uri} needs a file that does not exist: {exc}"
                ) from exc
            except CorruptLogError as exc:
                if segment.checkpoint is None:
                    raise
                segment = cls._older_segment(storage, version, segment.checkpoint.version, exc)
                continue
            snapshot = cls._from_segment(storage, segment, base, stats=stats)
            if base is not None:
                _give_back_freed_pages(base.files.num_rows + base.tombstones.num_rows)
            return snapshot

    @staticmethod
    def _read_base(storage: Storage, segment: LogSegment, stats: bool | None) -> TableState | None:
        if segment.checkpoint is None:
            return None
        base = read_checkpoint(storage, segment.checkpoint, stats=bool(stats))
        check_readable(base.protocol)
        return base

    @staticmethod
    def _older_segment(
        storage: Storage, version: int | None, bad: int, error: CorruptLogError
    ) -> LogSegment:
        try:
            segment = build_segment(storage, version, checkpoint_below=bad)
        except EngineError:
            raise error from None
        log.warning(
            "the checkpoint at version %d of %s cannot be read (%s); starting from %s",
            bad,
            storage.root_uri,
            error,
            f"the checkpoint at version {segment.checkpoint.version}"
            if segment.checkpoint
            else "version 0",
        )
        return segment

    @classmethod
    def _from_segment(
        cls,
        storage: Storage,
        segment: LogSegment,
        base: TableState | None,
        *,
        stats: bool | None = True,
    ) -> Snapshot:
        commits = read_commits(storage, segment.commits)
        unread = (
            (base.files.num_rows, base.tombstones.num_rows) if base and stats is None else (0, 0)
        )
        state, unread = fold_keeping(base, commits, segment.version, unread)
        if state is None:
            raise CorruptLogError(
                f"the log of {storage.root_uri} has no protocol or no metadata at version "
                f"{segment.version}"
            )
        if commits:
            last_actions = commits[-1][1]
        elif _ict_enabled(state):
            # A snapshot at a checkpoint: checkpoints drop commitInfo, but the commit of the
            # checkpoint's version is kept by cleanup and holds the in-commit timestamp. The
            # file's modification time is no substitute (a writer's clock may run ahead).
            last_actions = _actions_of_commit(storage, segment.version)
        else:
            last_actions = []
        timestamp = _commit_timestamp(state, last_actions, segment.timestamp_ms)
        late = LateStats(segment.checkpoint, unread) if segment.checkpoint else None
        return cls(
            storage, state, timestamp, segment.checkpoint, has_stats=stats is not False, late=late
        )

    def refresh(self) -> Snapshot:
        """The latest snapshot, reusing this one's state when no newer checkpoint exists (and
        its statistics, or where to read them, as this one has them)."""
        stats = None if self.has_stats else False
        try:
            commits, checkpoint = list_commits_after(self._storage, self.version)
        except VersionGapError:
            # Metadata cleanup removed commits this snapshot has not seen; a full load starts
            # from the newest checkpoint (and still fails if the gap is after it).
            return Snapshot.load(self._storage, stats=stats)
        with self._filling:
            base, late = self._state, self._late
        if not commits:
            if checkpoint is not None and checkpoint != self.checkpoint:
                return Snapshot(
                    self._storage,
                    base,
                    self.timestamp_ms,
                    checkpoint,
                    has_stats=self.has_stats,
                    late=late,
                )
            return self
        if checkpoint is not None and len(commits) > _REFRESH_REPLAY_LIMIT:
            # a newer checkpoint is cheaper than replay
            return Snapshot.load(self._storage, stats=stats)
        try:
            parsed = read_commits(self._storage, commits)
        except LogFileGoneError:
            # cleanup deleted commits after the listing
            return Snapshot.load(self._storage, stats=stats)
        state, unread = fold_keeping(
            base, parsed, commits[-1].version, late.rows if late else (0, 0)
        )
        assert state is not None  # the base already had protocol and metadata
        timestamp = _commit_timestamp(state, parsed[-1][1], commits[-1].file.mtime_ms)
        return Snapshot(
            self._storage,
            state,
            timestamp,
            checkpoint or self.checkpoint,
            has_stats=self.has_stats,
            late=replace(late, rows=unread) if late else None,
        )

    # -- identity ------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._state.version

    @property
    def checkpoint_version(self) -> int | None:
        """Version of the newest checkpoint this snapshot was built from or saw while refreshing."""
        return self.checkpoint.version if self.checkpoint else None

    @property
    def protocol(self) -> Protocol:
        return self._state.protocol

    @property
    def metadata(self) -> Metadata:
        return self._state.metadata

    @property
    def state(self) -> TableState:
        """Everything this snapshot knows, statistics included (read now if they were not)."""
        return self._with_stats()

    @property
    def stats_read(self) -> bool:
        """Whether the files' statistics are in memory (``False`` before they were asked for,
        and always on a snapshot loaded with ``stats=False``)."""
        return self.has_stats and self._late is None

    def _with_stats(self) -> TableState:
        if self._late is None:
            return self._state
        with self._filling:
            if self._late is not None:
                rows = sum(self._late.rows)
                self._state = fill_stats(self._storage, self._state, self._late)
                self._late = None
                _give_back_freed_pages(rows)
            return self._state

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def fields(self) -> list[Field]:
        if self._fields is None:
            self._fields = parse_schema(self.metadata.schema_string)
        return self._fields

    @property
    def schema(self) -> pa.Schema:
        """The table's logical schema as Arrow."""
        return to_arrow_schema(self.fields)

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.metadata.configuration)

    # -- files -----------------------------------------------------------------------------
    def files(self, *, stats: bool = True) -> pa.Table:
        """Live files, one row per ``add`` (columns as in the protocol, ``state.ADD_SCHEMA``).

        With ``stats=False``, what is in memory now: the ``stats`` and ``tags`` of rows whose
        statistics were not read yet are null (for a caller that needs neither)."""
        return (self._with_stats() if stats else self._state).files

    def tombstones(self, *, stats: bool = True) -> pa.Table:
        """Remove actions still in the state (not yet expired from checkpoints); ``stats`` as
        in ``files()``."""
        return (self._with_stats() if stats else self._state).tombstones

    def add_actions(self) -> Iterator[AddFile]:
        """Live files as ``AddFile`` objects (convenient, not for the hot path)."""
        for row in self._with_stats().files.to_pylist():
            yield AddFile.from_json(_row_to_json(row))

    @property
    def num_files(self) -> int:
        return int(self._state.files.num_rows)

    @property
    def size_bytes(self) -> int:
        total: int | None = pc.sum(self._state.files.column("size")).as_py()
        return int(total or 0)

    def file_uris(self, start: int = 0, stop: int | None = None) -> list[str]:
        """Absolute, percent-decoded location of every live file (aligned with ``files()``),
        or of its rows ``start:stop`` only (a caller streaming a big table in slices)."""
        prefix = self._relative_prefix()
        out: list[str] = []
        for chunk in _slices(self._rows(self._state.files.column("path"), start, stop)):
            if prefix is None or chunk.null_count:
                out.extend(self.resolve(p) for p in chunk.to_pylist())
                continue
            # Most paths are relative and need no decoding: join them to the root in Arrow and
            # send through ``resolve`` only the rows that may be encoded, absolute or URIs.
            uris = pc.binary_join_element_wise(prefix, chunk, "").to_pylist()
            if _may_need_resolving(chunk):
                special = pc.or_(
                    pc.or_(pc.match_substring(chunk, "%"), pc.match_substring(chunk, ":")),
                    pc.starts_with(chunk, "/"),
                )
                for i in pc.indices_nonzero(special).to_pylist():
                    uris[i] = self.resolve(chunk[i].as_py())
            out.extend(uris)
        return out

    def _relative_prefix(self) -> str | None:
        """What ``resolve`` puts before a plain relative path (``None``: no such constant)."""
        if isinstance(self._storage, LocalStorage):
            root = self._storage.root_path
            return root if root.endswith("/") else root + "/"
        if type(self._storage).uri is Storage.uri:
            return self._storage.root_uri + "/"
        return None

    def resolve(self, raw_path: str) -> str:
        """Absolute location of an action path: decoded once, joined to the root if relative."""
        decoded = decode_path(raw_path)
        if has_scheme(raw_path):
            if isinstance(self._storage, LocalStorage) and decoded.startswith("file:"):
                return "/" + decoded[len("file:") :].lstrip("/")
            return decoded
        if isinstance(self._storage, LocalStorage):
            return os.path.join(self._storage.root_path, decoded)
        if decoded.startswith("/"):
            # a scheme-less absolute path lives on the table's own filesystem (Spark qualifies it)
            root = urlsplit(self._storage.root_uri)
            return f"{root.scheme}://{root.netloc}{decoded}"
        return self._storage.uri(decoded)

    def partition_values(self) -> pa.Table:
        """Typed partition values of ``files()`` rows, one column per partition column
        (logical names; empty string and null are null)."""
        by_name = {f.name: f for f in self.fields}
        values = self._state.files.column("partitionValues").combine_chunks()
        columns: list[pa.Array] = []
        names: list[str] = []
        for name in self.partition_columns:
            field = by_name.get(name)
            physical = field.physical_name if field else name
            raw = (
                pc.map_lookup(values, pa.scalar(physical), "first")
                if len(values)
                else pa.array([], pa.string())
            )
            columns.append(parse_partition_column(raw, field.type if field else "string"))
            names.append(name)
        return pa.Table.from_arrays(columns, names=names) if names else pa.table({})

    def raw_partition_values(
        self, start: int = 0, stop: int | None = None
    ) -> list[dict[str, str | None]]:
        """Partition values as in the log, keyed by logical column names (aligned with
        ``files()``, or with its rows ``start:stop``)."""
        by_physical = {f.physical_name: f.name for f in self.fields}
        out: list[dict[str, str | None]] = []
        column = self._rows(self._state.files.column("partitionValues"), start, stop)
        for row in column.to_pylist():
            out.append({by_physical.get(k, k): v for k, v in (row or [])})
        return out

    @staticmethod
    def _rows(column: pa.ChunkedArray, start: int, stop: int | None) -> pa.ChunkedArray:
        """Rows ``start:stop`` of a column of ``files()`` (all of it by default)."""
        if start < 0 or (stop is not None and stop < start):
            raise ValueError(f"not a slice of the live files: {start}:{stop}")
        if start == 0 and stop is None:
            return column
        end = len(column) if stop is None else min(stop, len(column))
        start = min(start, end)
        return column.slice(start, end - start)

    # -- other state -----------------------------------------------------------------------
    def txn_version(self, app_id: str) -> int | None:
        txn = self._state.txns.get(app_id)
        return txn.version if txn else None

    @property
    def domains(self) -> dict[str, DomainMetadata]:
        return dict(self._state.domains)


#: rows of the path column turned into locations at a time: the joined Arrow strings of one
#: slice are freed before the next, so only the Python strings of the result accumulate
_URI_SLICE = 16_384


def _slices(column: pa.ChunkedArray) -> Iterator[pa.Array]:
    for chunk in column.chunks:
        for begin in range(0, len(chunk), _URI_SLICE):
            yield chunk.slice(begin, _URI_SLICE)


def _may_need_resolving(paths: pa.Array) -> bool:
    """Whether any path may be percent-encoded (``%``), a URI (``:``) or absolute (``/``).

    One scan of the raw bytes (a memchr) instead of a per-row substring search.
    """
    if len(paths) == 0:
        return False
    if not (pa.types.is_string(paths.type) or pa.types.is_large_string(paths.type)):
        return True
    if pc.any(pc.starts_with(paths, "/")).as_py():
        return True
    offsets_buf, data = paths.buffers()[1:3]
    if data is None:
        return False
    as_bytes = memoryview(offsets_buf).cast("B")
    offsets = as_bytes.cast("q") if pa.types.is_large_string(paths.type) else as_bytes.cast("i")
    start, end = offsets[paths.offset], offsets[paths.offset + len(paths)]
    raw = data.slice(start, end - start).to_pybytes()
    return b"%" in raw or b":" in raw


#: checkpoint rows from which a decoded checkpoint's freed pages are worth giving back
GIVE_BACK_ROWS = 20_000


def _give_back_freed_pages(rows: int) -> None:
    """Return to the system the pages Arrow's allocator kept after decoding ``rows`` rows of a
    checkpoint, when they are many.

    Decoding a checkpoint frees most of what it allocated (the file's pages, the columns of
    other action types, the rows filtered away), and mimalloc, pyarrow's default, keeps those
    pages for later Arrow allocations; the Python objects a caller makes next (``file_uris()``'s
    strings) cannot use them and land on top. Measured on the read benchmark's 100,000-file
    table, fresh process, load + ``file_uris()``: peak 231 -> 202 MB on mimalloc, 177 -> 152
    MB on the system allocator, for 1-3 ms (docs/benchmarks.md, read_snapshot). Small
    checkpoints keep theirs: a controller loading a thousand of them reuses the pages, and
    giving them back each time cost it about 1 ms a load."""
    if rows >= GIVE_BACK_ROWS:
        pa.default_memory_pool().release_unused()


def _ict_enabled(state: TableState) -> bool:
    return state.metadata.configuration.get("delta.enableInCommitTimestamps", "").lower() == "true"


def _actions_of_commit(storage: Storage, version: int) -> list[Action]:
    try:
        data = storage.read_log(commit_name(version))
    except FileNotFoundError:
        return []
    return parse_commit(data, source=f"{LOG_DIR}/{commit_name(version)}")


def _commit_timestamp(state: TableState, last_actions: list[Action], fallback: int) -> int:
    if _ict_enabled(state):
        for action in last_actions:
            if isinstance(action, CommitInfo) and action.in_commit_timestamp is not None:
                return action.in_commit_timestamp
    return fallback


def _row_to_json(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None:
            continue
        if key in ("partitionValues", "tags"):
            value = dict(value)
        elif key == "deletionVector":
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    if "partitionValues" not in out:
        out["partitionValues"] = {}
    return out
