"""Recent write activity per partition, read from the newest commit files only.

Maintenance that plans around other writers needs to know which partitions they are writing now.
The log says it: every commit's ``add``/``remove`` actions carry their partition values, and its
time is the ``inCommitTimestamp`` of its ``commitInfo`` (tables with In-Commit Timestamps) or
else the commit file's modification time (PROTOCOL.md). This module reads commits newest first,
stopping at the first one older than the window or after ``max_commits`` files, so its cost is
bounded by the recent activity, never by the length of the log (no checkpoint, no full replay).

Not every write costs an OPTIMIZE the same. OPTIMIZE commits ``dataChange=false`` rewrites, which
the engine downgrades to SnapshotIsolation, so a concurrent *append* never conflicts with it
(``engine.commit.conflicts``: added files are only checked above SnapshotIsolation). What does cost
it is a commit that *removes* files: a DELETE, UPDATE, MERGE, overwrite, or another OPTIMIZE,
including a DELETE that only adds a deletion vector (it removes the file and adds it back with the
vector). When such a commit removes an input of one of our bins between planning and committing, the
bin's rewritten bytes are thrown away; when it removes another file of a partition our batch read,
the batch retries. Hence the two figures per partition: commits of any kind, and commits that
remove. A commit that changes the table's metadata or protocol conflicts with every transaction; it
is reported on its own (``table_wide``).

Actions with ``dataChange=false`` (OPTIMIZE, REORG, auto-compaction: rows rearranged, not
changed) are not writes here: they are counted apart (``rearranging_commits``). A partition an
OPTIMIZE just compacted is the quietest there is, and counting our own runs' commits as writes
would make every run defer what the previous one compacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.actions import (
    Action,
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    RemoveFile,
    parse_commit,
)
from txntable.engine.storage.base import FileInfo, LocalStorage, Storage
from txntable.engine.storage.paths import LOG_DIR, LogFileKind, listing_prefix, parse_log_name

#: Newest commit files read at most per call, whatever the window.
DEFAULT_MAX_COMMITS = 1000
#: Commit files fetched together (in parallel on object stores): a few first, since most
#: windows hold few commits, doubling up to the most
_FIRST_CHUNK = 4
_MAX_CHUNK = 32

PartitionKey = tuple[str | None, ...]


@dataclass
class PartitionActivity:
    """What commits in the window did to one partition (counts over the commits read)."""

    partition_values: dict[str, str | None]
    #: commits that added or removed a file of this partition
    commits: int = 0
    #: of those, commits that removed a file of it (what invalidates an OPTIMIZE's inputs)
    removing_commits: int = 0
    files_added: int = 0
    files_removed: int = 0
    bytes_added: int = 0
    #: bytes of the removed files that say their size (``remove.size`` is optional)
    bytes_removed: int = 0
    #: rows of the added files with ``numRecords`` statistics
    rows_added: int = 0
    #: rows of the removed files with statistics (writers often leave them out of removes)
    rows_removed: int = 0
    last_write_ms: int = 0
    last_remove_ms: int | None = None
    operations: set[str] = field(default_factory=set)
    #: commits whose every action on it had ``dataChange=false`` (OPTIMIZE and the like):
    #: they are not counted above, since they changed no rows (see the module docstring)
    rearranging_commits: int = 0
    #: operations of the commits that removed files of it
    removing_operations: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {
            "partitionValues": self.partition_values,
            "commits": self.commits,
            "removingCommits": self.removing_commits,
            "filesAdded": self.files_added,
            "filesRemoved": self.files_removed,
            "bytesAdded": self.bytes_added,
            "bytesRemoved": self.bytes_removed,
            "rowsAdded": self.rows_added,
            "rowsRemoved": self.rows_removed,
            "lastWriteMs": self.last_write_ms,
            "lastRemoveMs": self.last_remove_ms,
            "operations": sorted(self.operations),
            "removingOperations": sorted(self.removing_operations),
            "rearrangingCommits": self.rearranging_commits,
        }


@dataclass(frozen=True)
class TableWideChange:
    """A commit in the window that changed metadata or protocol (conflicts with everything)."""

    version: int
    timestamp_ms: int
    operation: str


@dataclass(frozen=True)
class RecentActivity:
    """Activity of the commits with a timestamp from ``since_ms`` on (``until_ms`` is the time
    the window ends at, "now"; a commit dated later by a skewed clock counts as recent), by
    partition."""

    partition_columns: tuple[str, ...]
    since_ms: int
    until_ms: int
    #: versions of the newest and oldest commit read in the window (None: no commit in it)
    newest_version: int | None
    oldest_version: int | None
    commits: int
    #: False when ``max_commits`` stopped the reading before a commit older than the window
    #: (older commits in the window were not looked at) or the log had no older commit
    complete: bool
    partitions: Mapping[PartitionKey, PartitionActivity]
    table_wide: tuple[TableWideChange, ...] = ()
    #: removes without ``partitionValues`` (optional in the protocol): their partition is unknown
    removes_without_partition: int = 0

    def written_since(self, since_ms: int, *, removes_only: bool) -> dict[PartitionKey, int]:
        """Partitions written at or after ``since_ms`` (by a removing commit when
        ``removes_only``), with the time of the newest such write."""
        out: dict[PartitionKey, int] = {}
        for key, act in self.partitions.items():
            last = act.last_remove_ms if removes_only else act.last_write_ms
            if last is not None and last >= since_ms:
                out[key] = last
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "sinceMs": self.since_ms,
            "untilMs": self.until_ms,
            "newestVersion": self.newest_version,
            "oldestVersion": self.oldest_version,
            "commits": self.commits,
            "complete": self.complete,
            "removesWithoutPartition": self.removes_without_partition,
            "tableWide": [
                {"version": c.version, "timestampMs": c.timestamp_ms, "operation": c.operation}
                for c in self.table_wide
            ],
            "partitions": [
                a.to_json()
                for _, a in sorted(self.partitions.items(), key=lambda kv: _sort_key(kv[0]))
            ],
        }


def _sort_key(key: PartitionKey) -> tuple[tuple[int, str], ...]:
    return tuple((0, "") if v is None else (1, v) for v in key)


def read_recent_activity(
    storage: Storage,
    latest_version: int,
    window_ms: int,
    *,
    partition_columns: Sequence[str],
    partition_keys: Mapping[str, str] | None = None,
    now_ms: int | None = None,
    max_commits: int = DEFAULT_MAX_COMMITS,
) -> RecentActivity:
    """Per-partition activity of the commits of the last ``window_ms`` before ``now_ms``.

    ``latest_version`` is a version known to exist (a snapshot's); commits newer than it that are
    already in the log are read too. At most ``max_commits`` commit files are read, newest first,
    from a listing that starts ``max_commits`` versions back. ``partition_keys`` maps a logical
    partition column to its key in ``partitionValues`` (physical names under column mapping)."""
    if window_ms < 0:
        raise InvalidArgumentError(f"the activity window must not be negative, got {window_ms} ms")
    if max_commits < 1:
        raise InvalidArgumentError(f"max_commits must be at least 1, got {max_commits}")
    if latest_version < 0:
        raise InvalidArgumentError(f"latest_version must not be negative, got {latest_version}")
    until = int(time.time() * 1000) if now_ms is None else now_ms
    since = until - window_ms
    start = max(0, latest_version - max_commits + 1)
    listed = [
        (parsed.version, info)
        for info in storage.list_log(listing_prefix(start))
        if (parsed := parse_log_name(info.name)) is not None
        and parsed.kind is LogFileKind.COMMIT
        and parsed.version >= start
    ]
    listed.sort(key=lambda vi: -vi[0])
    listed = listed[:max_commits]
    acc = _Accumulator(tuple(partition_columns), dict(partition_keys or {}))
    reached_older = False
    i, size = 0, _FIRST_CHUNK
    while i < len(listed) and not reached_older:
        chunk = listed[i : i + size]
        i, size = i + len(chunk), min(size * 2, _MAX_CHUNK)
        for (version, info), data in zip(chunk, _fetch(storage, chunk), strict=True):
            if data is None:  # vanished (log cleanup): everything older is gone too
                reached_older = True
                break
            actions = parse_commit(data, source=f"{LOG_DIR}/{info.name}")
            ts = _timestamp(actions, info)
            if ts < since:
                reached_older = True
                break
            acc.add(version, ts, actions)  # one dated after now (a skewed clock) is recent too
    return RecentActivity(
        partition_columns=tuple(partition_columns),
        since_ms=since,
        until_ms=until,
        newest_version=acc.newest,
        oldest_version=acc.oldest,
        commits=acc.commits,
        complete=reached_older or (bool(listed) and listed[-1][0] == 0),
        partitions=acc.partitions,
        table_wide=tuple(acc.table_wide),
        removes_without_partition=acc.removes_without_partition,
    )


def _fetch(storage: Storage, chunk: Sequence[tuple[int, FileInfo]]) -> list[bytes | None]:
    def one(item: tuple[int, FileInfo]) -> bytes | None:
        try:
            return storage.read_log(item[1].name)
        except FileNotFoundError:
            return None

    if isinstance(storage, LocalStorage) or len(chunk) < 2:
        return [one(item) for item in chunk]
    with ThreadPoolExecutor(max_workers=min(16, len(chunk))) as pool:
        return list(pool.map(one, chunk))


def _timestamp(actions: Sequence[Action], info: FileInfo) -> int:
    """``inCommitTimestamp`` when the commit has one, else the file's modification time."""
    ci = next((a for a in actions if isinstance(a, CommitInfo)), None)
    ict = ci.in_commit_timestamp if ci else None
    return ict if ict is not None else info.mtime_ms


class _Accumulator:
    def __init__(self, columns: tuple[str, ...], keys: dict[str, str]) -> None:
        self.columns = columns
        self.keys = keys
        self.partitions: dict[PartitionKey, PartitionActivity] = {}
        self.table_wide: list[TableWideChange] = []
        self.removes_without_partition = 0
        self.commits = 0
        self.newest: int | None = None
        self.oldest: int | None = None

    def _key(self, values: Mapping[str, str | None]) -> PartitionKey:
        out = []
        for col in self.columns:
            v = values.get(self.keys.get(col, col))
            out.append(None if v is None or v == "" else v)
        return tuple(out)

    def _entry(self, key: PartitionKey) -> PartitionActivity:
        entry = self.partitions.get(key)
        if entry is None:
            entry = PartitionActivity(dict(zip(self.columns, key, strict=True)))
            self.partitions[key] = entry
        return entry

    def add(self, version: int, ts: int, actions: Sequence[Action]) -> None:
        self.commits += 1
        self.newest = version if self.newest is None else max(self.newest, version)
        self.oldest = version if self.oldest is None else min(self.oldest, version)
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        operation = (info.operation if info else None) or "UNKNOWN"
        if any(isinstance(a, Metadata | Protocol) for a in actions):
            self.table_wide.append(TableWideChange(version, ts, operation))
        touched: set[PartitionKey] = set()
        removed: set[PartitionKey] = set()
        rearranged: set[PartitionKey] = set()
        for a in actions:
            if isinstance(a, AddFile | RemoveFile) and not a.data_change:
                # a rearrangement (OPTIMIZE, REORG, a DV purge): the rows did not change
                if a.partition_values is not None:
                    rearranged.add(self._key(a.partition_values))
                continue
            if isinstance(a, AddFile):
                key = self._key(a.partition_values)
                entry = self._entry(key)
                entry.files_added += 1
                entry.bytes_added += a.size
                entry.rows_added += _records(a.stats)
                touched.add(key)
            elif isinstance(a, RemoveFile):
                if a.partition_values is None:
                    self.removes_without_partition += 1
                    continue
                key = self._key(a.partition_values)
                entry = self._entry(key)
                entry.files_removed += 1
                entry.bytes_removed += a.size or 0
                entry.rows_removed += _records(a.stats)
                touched.add(key)
                removed.add(key)
        for key in rearranged - touched:
            self._entry(key).rearranging_commits += 1
        for key in touched:
            entry = self.partitions[key]
            entry.commits += 1
            entry.operations.add(operation)
            entry.last_write_ms = max(entry.last_write_ms, ts)
            if key in removed:
                entry.removing_commits += 1
                entry.removing_operations.add(operation)
                entry.last_remove_ms = max(entry.last_remove_ms or 0, ts)


def _records(stats: str | None) -> int:
    if not stats:
        return 0
    try:
        value = json.loads(stats).get("numRecords")
    except (ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and value > 0 else 0


__all__ = [
    "DEFAULT_MAX_COMMITS",
    "PartitionActivity",
    "RecentActivity",
    "TableWideChange",
    "read_recent_activity",
]
