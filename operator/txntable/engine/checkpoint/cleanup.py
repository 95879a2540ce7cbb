"""Metadata (log) cleanup: delete commits and checkpoints that retention no longer needs.

The protocol's procedure with Delta Spark's refinements (PROTOCOL.md "Metadata Cleanup"): the cutoff
is midnight UTC of ``now - delta.logRetentionDuration`` (default 30 days); commit modification times
are first made strictly increasing with the version (a clock that went backwards must not expose a
newer commit); the newest *complete* checkpoint whose version is at or below the newest commit older
than the cutoff becomes the cutoff checkpoint; only files of versions strictly below it are deleted
(commits, their ``.crc``, older checkpoints of every kind), plus compaction files starting at or
below it and sidecars no remaining checkpoint references that are older than a day. The cutoff
checkpoint and its commit stay, so every version from it on is still reconstructable.
On local disk each file goes with Hadoop's checksum file ``.<name>.crc`` (``LocalStorage.delete``),
as Hadoop's own deletes take it; checksum files of log files below the cutoff checkpoint that are
gone already (left by a cleanup that did not take them) go too: Hadoop would refuse a file
created again under that name.
Deletion runs in ascending version order: a crash at any point leaves a suffix of the log that
the cutoff checkpoint still covers. Every feature of the table must be one whose rules this
engine knows (``features.check_maintainable``). Tables with the ``checkpointProtection`` writer
feature are cleaned like any other: its RFC lets a cleanup ignore
``delta.requireCheckpointProtectionBeforeVersion`` when it creates no checkpoint and deletes none
at or after its truncation version, and this one does neither (the barrier checkpoint a dropped
feature hides behind goes only with everything before it). Temporary files of a crashed
checkpoint writer are removed once they are a day old.

An incomplete multi-part checkpoint (fewer parts than its name says, or an empty one) whose
newest part is an hour old was abandoned by its writer, which died while putting the parts in
place; it is removed at any version. Every reader skips it, but it is not harmless: deltalake's
log cleanup takes any checkpoint file for a checkpoint, deletes the log and the complete
checkpoint below it, and the table is lost to every engine (found by the soak, docs/reliability.md).
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from txntable.engine.checkpoint import retention
from txntable.engine.errors import EngineError
from txntable.engine.model.actions import Sidecar, parse_commit
from txntable.engine.model.features import check_maintainable
from txntable.engine.read.checkpoint_read import checkpoint_problem
from txntable.engine.read.segment import CheckpointRef, complete_checkpoints
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.storage.paths import (
    LOG_DIR,
    SIDECAR_DIR,
    LogFileKind,
    LogFileName,
    hadoop_checksummed,
    parse_log_name,
)
from txntable.engine.testhooks import pause_point

log = logging.getLogger(__name__)

SIDECAR_GRACE_MS = retention.DAY_MS
#: an incomplete multi-part checkpoint this much older than now was abandoned: our writer puts
#: a set's parts in place within milliseconds of each other, Spark's tasks within its job
ABANDONED_PARTS_MS = 60 * 60 * 1000
#: temporary files of a checkpoint writer that crashed (``checkpoint.write._stage``)
_CHECKPOINT_TEMP = re.compile(r"^\.\d{20}\.checkpoint\..*\.tmp$")


@dataclass(frozen=True, slots=True)
class CleanupResult:
    """What cleanup deleted (or, in a dry run, would delete)."""

    cutoff_ms: int
    checkpoint_version: int | None
    deleted: tuple[str, ...]
    dry_run: bool
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoffMs": self.cutoff_ms,
            "checkpointVersion": self.checkpoint_version,
            "deleted": list(self.deleted),
            "numDeleted": len(self.deleted),
            "dryRun": self.dry_run,
            "skipped": self.skipped,
        }


@dataclass(frozen=True, slots=True)
class _Plan:
    checkpoint_version: int | None
    log_files: list[str]  # names in _delta_log, in deletion order
    kept_checkpoints: list[LogFileName]


def day_cutoff(now_ms: int, retention_ms: int) -> int:
    """Midnight UTC at or before ``now - retention`` (Spark truncates the cutoff to the day)."""
    raw = now_ms - retention_ms
    return raw - raw % retention.DAY_MS


def plan_log_cleanup(
    listing: list[FileInfo],
    cutoff_ms: int,
    usable: Callable[[CheckpointRef], bool] | None = None,
) -> _Plan:
    """Which ``_delta_log`` files to delete for a cutoff (a listing in, names out).

    The cutoff checkpoint is the newest complete checkpoint at or below the newest commit older
    than the cutoff whose every checkpoint at that version passes ``usable`` (readable and whole:
    a truncated or corrupt one must never decide what goes). Only whole versions strictly below
    it are deleted, never a part of the checkpoint that stays."""
    named = [(p, info) for info in listing if (p := parse_log_name(info.name)) is not None]
    commits = sorted(
        (p.version, info.mtime_ms) for p, info in named if p.kind is LogFileKind.COMMIT
    )
    cutoff_commit: int | None = None
    previous = -1
    for version, mtime in commits:
        adjusted = mtime if mtime > previous else previous + 1
        previous = adjusted
        if adjusted <= cutoff_ms:
            cutoff_commit = version
        else:
            break  # adjusted times only grow from here on
    by_version: dict[int, list[CheckpointRef]] = defaultdict(list)
    for ref in complete_checkpoints(listing):
        by_version[ref.version].append(ref)
    keep_from: int | None = None
    if cutoff_commit is not None:
        for version in sorted((v for v in by_version if v <= cutoff_commit), reverse=True):
            if usable is None or all(usable(ref) for ref in by_version[version]):
                keep_from = version
                break
    if keep_from is None:
        kept = [p for p, _ in named if p.is_checkpoint]
        return _Plan(None, [], kept)
    doomed: list[tuple[int, int, str]] = []
    kept_checkpoints: list[LogFileName] = []
    for parsed, _ in named:
        if parsed.kind is LogFileKind.COMPACTED:
            if parsed.version <= keep_from:
                doomed.append((parsed.version, 1, parsed.name))
        elif parsed.version < keep_from:
            # within one version: checkpoint before .crc before commit
            order = 0 if parsed.is_checkpoint else (1 if parsed.kind is LogFileKind.CRC else 2)
            doomed.append((parsed.version, order, parsed.name))
        elif parsed.is_checkpoint:
            kept_checkpoints.append(parsed)
    listed = {info.name for info in listing}
    for info in listing:
        owner = hadoop_checksummed(info.name)
        parsed_owner = parse_log_name(owner) if owner else None
        if parsed_owner and parsed_owner.version < keep_from and owner not in listed:
            doomed.append((parsed_owner.version, 3, info.name))  # an orphan: its file is gone
    doomed.sort()
    return _Plan(keep_from, [name for _, _, name in doomed], kept_checkpoints)


def abandoned_parts(listing: list[FileInfo], now_ms: int) -> list[str]:
    """Names of the files of incomplete multi-part checkpoints whose every file is older than
    ``ABANDONED_PARTS_MS`` (module docstring)."""
    sets: dict[tuple[int, int], list[FileInfo]] = defaultdict(list)
    for info in listing:
        parsed = parse_log_name(info.name)
        if parsed is not None and parsed.kind is LogFileKind.CHECKPOINT_MULTIPART:
            sets[(parsed.version, parsed.num_parts)].append(info)
    complete = {
        (ref.version, len(ref.files))
        for ref in complete_checkpoints(listing)
        if ref.kind is LogFileKind.CHECKPOINT_MULTIPART
    }
    return sorted(
        info.name
        for key, files in sets.items()
        if key not in complete and max(f.mtime_ms for f in files) < now_ms - ABANDONED_PARTS_MS
        for info in files
    )


def _sidecars_of(storage: Storage, checkpoint: LogFileName) -> set[str] | None:
    """File names of the sidecars a checkpoint references (None: it could not be read)."""
    relative = f"{LOG_DIR}/{checkpoint.name}"
    try:
        if checkpoint.name.endswith(".json"):
            actions = parse_commit(storage.read(relative), source=checkpoint.name)
            paths = [a.path for a in actions if isinstance(a, Sidecar)]
        else:
            source = storage.open_input(relative)
            try:
                pf = pq.ParquetFile(source)
                if "sidecar" not in pf.schema_arrow.names:
                    return set()
                column = pf.read(columns=["sidecar"]).column("sidecar")
                paths = pc.struct_field(column.filter(pc.is_valid(column)), "path").to_pylist()
            finally:
                if not isinstance(source, str):
                    source.close()
    except (OSError, EngineError, ValueError) as exc:
        log.warning("cannot read %s to find its sidecars (%s): keeping all sidecars", relative, exc)
        return None
    return {p.rsplit("/", 1)[-1] for p in paths}


def _doomed_sidecars(storage: Storage, kept: list[LogFileName], now_ms: int) -> list[str]:
    sidecars = storage.list_dir(f"{LOG_DIR}/{SIDECAR_DIR}")
    if not sidecars:
        return []
    referenced: set[str] = set()
    for checkpoint in kept:
        if checkpoint.kind is LogFileKind.CHECKPOINT_MULTIPART:
            continue  # multi-part checkpoints are always V1 spec
        names = _sidecars_of(storage, checkpoint)
        if names is None:
            return []
        referenced |= names
    return [
        f"{SIDECAR_DIR}/{s.name}"
        for s in sidecars
        if s.name not in referenced and s.mtime_ms < now_ms - SIDECAR_GRACE_MS
    ]


def cleanup_expired_logs(
    snapshot: Snapshot,
    *,
    now_ms: int | None = None,
    dry_run: bool = False,
    retention_ms: int | None = None,
) -> CleanupResult:
    """Delete (or list, with ``dry_run``) the log files that retention no longer needs.

    ``snapshot`` supplies the table properties and protocol (use the latest one);
    ``retention_ms`` overrides ``delta.logRetentionDuration``."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    config = snapshot.configuration
    if retention_ms is None:
        retention_ms = retention.duration_ms(
            config, retention.LOG_RETENTION, retention.DEFAULT_LOG_RETENTION_MS
        )
    assert retention_ms is not None
    cutoff = day_cutoff(now, retention_ms)
    check_maintainable(snapshot.protocol, "log cleanup")
    if not retention.bool_property(config, retention.EXPIRED_LOG_CLEANUP, True):
        return CleanupResult(cutoff, None, (), dry_run, "delta.enableExpiredLogCleanup is false")
    storage = snapshot.storage
    listing = storage.list_log()

    def usable(ref: CheckpointRef) -> bool:
        problem = checkpoint_problem(storage, ref)
        if problem is not None:
            log.warning(
                "log cleanup of %s will not start from the checkpoint at version %d: %s",
                storage.root_uri,
                ref.version,
                problem,
            )
        return problem is None

    plan = plan_log_cleanup(listing, cutoff, usable)
    doomed = [f"{LOG_DIR}/{name}" for name in plan.log_files]
    going = set(plan.log_files)
    abandoned = [n for n in abandoned_parts(listing, now) if n not in going]
    doomed += [f"{LOG_DIR}/{name}" for name in abandoned]
    if abandoned:
        log.warning(
            "log cleanup of %s removes %d parts of incomplete multi-part checkpoints an "
            "hour old (%s): deltalake's cleanup would take them for checkpoints",
            storage.root_uri,
            len(abandoned),
            ", ".join(abandoned),
        )
    doomed += [
        f"{LOG_DIR}/{f.name}"
        for f in listing
        if _CHECKPOINT_TEMP.match(f.name) and f.mtime_ms < now - SIDECAR_GRACE_MS
    ]
    doomed += [f"{LOG_DIR}/{s}" for s in _doomed_sidecars(storage, plan.kept_checkpoints, now)]
    if not dry_run:
        pause_point("cleanup:before-delete")
        for count, relative in enumerate(doomed, start=1):
            storage.delete(relative)
            pause_point(f"cleanup:deleted:{count}")
        log.info(
            "log cleanup of %s deleted %d files below checkpoint %s",
            storage.root_uri,
            len(doomed),
            plan.checkpoint_version,
        )
    return CleanupResult(cutoff, plan.checkpoint_version, tuple(doomed), dry_run, None)
