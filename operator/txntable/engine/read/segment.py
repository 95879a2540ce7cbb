"""Choosing the log segment: one complete checkpoint plus the contiguous commits after it.

This is where a corrupt or partly cleaned-up log is told apart from a healthy one (PROTOCOL.md
"Delta Log Entries", "Checkpoints"): temp files and junk are ignored, zero-byte and incomplete
multi-part checkpoints are skipped, a stale or wrong ``_last_checkpoint`` only costs a longer
listing, and a gap in the commits after the checkpoint is an error rather than a silently wrong
snapshot.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from txntable.engine.errors import (
    TableNotFoundError,
    TruncatedLogError,
    VersionGapError,
    VersionNotFoundError,
)
from txntable.engine.read import last_checkpoint
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.storage.paths import LogFileKind, LogFileName, listing_prefix, parse_log_name


@dataclass(frozen=True, slots=True)
class CheckpointRef:
    """A complete checkpoint: its version, kind and file(s)."""

    version: int
    kind: LogFileKind
    files: tuple[FileInfo, ...]


@dataclass(frozen=True, slots=True)
class Commit:
    version: int
    file: FileInfo


@dataclass(frozen=True, slots=True)
class LogSegment:
    """What to read to reconstruct ``version``."""

    version: int
    checkpoint: CheckpointRef | None
    commits: tuple[Commit, ...]  # strictly after the checkpoint, contiguous, ending at version
    #: modification time (ms) of the newest commit file (the snapshot's timestamp without ICT)
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class _Listed:
    commits: dict[int, FileInfo]
    checkpoints: list[CheckpointRef]


def _classify(files: list[FileInfo], upto: int | None) -> _Listed:
    commits: dict[int, FileInfo] = {}
    single: list[CheckpointRef] = []
    parts: dict[tuple[int, int], dict[int, FileInfo]] = defaultdict(dict)
    for info in files:
        parsed: LogFileName | None = parse_log_name(info.name)
        if parsed is None or (upto is not None and parsed.version > upto):
            continue
        if parsed.kind is LogFileKind.COMMIT:
            commits[parsed.version] = info
        elif parsed.is_checkpoint and info.size > 0:
            if parsed.kind is LogFileKind.CHECKPOINT_MULTIPART:
                parts[(parsed.version, parsed.num_parts)][parsed.part] = info
            else:
                single.append(CheckpointRef(parsed.version, parsed.kind, (info,)))
    complete = list(single)
    for (version, num_parts), found in parts.items():
        if len(found) == num_parts:
            ordered = tuple(found[i] for i in range(1, num_parts + 1))
            complete.append(CheckpointRef(version, LogFileKind.CHECKPOINT_MULTIPART, ordered))
    return _Listed(commits, complete)


def complete_checkpoints(files: list[FileInfo]) -> list[CheckpointRef]:
    """The complete checkpoints of a listing (non-empty files; every part of a multi-part one)."""
    return _classify(files, None).checkpoints


_KIND_ORDER = {
    LogFileKind.CHECKPOINT_CLASSIC: 0,
    LogFileKind.CHECKPOINT_MULTIPART: 1,
    LogFileKind.CHECKPOINT_UUID: 2,
}


def _preference(c: CheckpointRef) -> tuple[int, int, int, str]:
    # Spark's tie-break at one version: classic < multi-part (more parts wins) < V2 (by name).
    return (c.version, _KIND_ORDER[c.kind], len(c.files), c.files[0].name)


def by_preference(checkpoints: list[CheckpointRef]) -> list[CheckpointRef]:
    """Checkpoints in the order a reader prefers them: newest version first, and at one
    version the one Spark picks first."""
    return sorted(checkpoints, key=_preference, reverse=True)


def _newest_checkpoint(checkpoints: list[CheckpointRef]) -> CheckpointRef | None:
    if not checkpoints:
        return None
    return max(checkpoints, key=_preference)


def build_segment(
    storage: Storage, version: int | None = None, *, checkpoint_below: int | None = None
) -> LogSegment:
    """The segment for ``version`` (latest when ``None``); with ``checkpoint_below``, only a
    checkpoint older than that version may start it (the newer one could not be read)."""
    if checkpoint_below is not None:
        listed = _classify(storage.list_log(), version)
        older = [c for c in listed.checkpoints if c.version < checkpoint_below]
        return _segment_from(listed, _newest_checkpoint(older), version, storage)
    hint = last_checkpoint.read(storage)
    start = hint.version if hint and (version is None or hint.version <= version) else 0
    listed = _classify(storage.list_log(listing_prefix(start)), version)
    if start > 0 and not listed.commits and not listed.checkpoints:
        start = 0  # the table may have been deleted and re-created; Spark re-lists from 0
        listed = _classify(storage.list_log(), version)
    checkpoint = _newest_checkpoint(listed.checkpoints)
    if start > 0 and (checkpoint is None or checkpoint.version < start):
        # The hint names a checkpoint the listing cannot confirm: look further back.
        listed = _classify(storage.list_log(), version)
        checkpoint = _newest_checkpoint(listed.checkpoints)
    return _segment_from(listed, checkpoint, version, storage)


def _segment_from(
    listed: _Listed, checkpoint: CheckpointRef | None, version: int | None, storage: Storage
) -> LogSegment:
    if not listed.commits and checkpoint is None:
        if version is not None:
            raise VersionNotFoundError(f"version {version} is not in the log of {storage.root_uri}")
        raise TableNotFoundError(f"no Delta table at {storage.root_uri} (no commits in _delta_log)")
    first = checkpoint.version + 1 if checkpoint else 0
    newer = sorted(v for v in listed.commits if v >= first)
    latest = newer[-1] if newer else (checkpoint.version if checkpoint else -1)
    if version is not None and latest != version:
        newest = max([*listed.commits, *(c.version for c in listed.checkpoints)], default=-1)
        raise VersionNotFoundError(
            f"cannot time travel to version {version}: the newest version is {newest}"
        )
    if checkpoint is None and newer and newer[0] != 0:
        earliest = newer[0]
        if version is not None:
            raise VersionNotFoundError(
                f"version {version} is no longer reconstructable: the log starts at {earliest} "
                "and there is no checkpoint at or before it"
            )
        raise TruncatedLogError(
            f"the log of {storage.root_uri} starts at version {earliest} without a checkpoint "
            "(commits before it were deleted)"
        )
    expected = first
    for v in newer:
        if v != expected:
            raise VersionGapError(
                f"the log of {storage.root_uri} is missing commit version {expected} "
                f"(found {v} next)"
            )
        expected += 1
    commits = tuple(Commit(v, listed.commits[v]) for v in newer)
    last_file = listed.commits.get(latest)
    timestamp = (
        last_file.mtime_ms if last_file else (checkpoint.files[0].mtime_ms if checkpoint else 0)
    )
    return LogSegment(latest, checkpoint, commits, timestamp)


def list_commits_after(storage: Storage, version: int) -> tuple[list[Commit], CheckpointRef | None]:
    """Commits newer than ``version`` (contiguous from ``version + 1``) and the newest complete
    checkpoint at ``version`` or later, for incremental refresh and for finding winning commits
    (a checkpoint written at the snapshot's own version counts: the controller reports it)."""
    listed = _classify(storage.list_log(listing_prefix(version)), None)
    newer = sorted(v for v in listed.commits if v > version)
    expected = version + 1
    commits: list[Commit] = []
    for v in newer:
        if v != expected:
            raise VersionGapError(f"the log is missing commit version {expected} (found {v} next)")
        commits.append(Commit(v, listed.commits[v]))
        expected += 1
    checkpoint = _newest_checkpoint([c for c in listed.checkpoints if c.version >= version])
    return commits, checkpoint


def list_all_commits(storage: Storage) -> list[Commit]:
    """Every retained commit file, ascending (for history and timestamp lookups)."""
    listed = _classify(storage.list_log(), None)
    return [Commit(v, listed.commits[v]) for v in sorted(listed.commits)]
