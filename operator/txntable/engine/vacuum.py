"""VACUUM: delete the data files no version inside the retention can read.

OPTIMIZE, overwrites and deletes only ``remove`` files from the log; the files stay in storage so
that time travel and slow readers keep working, until VACUUM deletes them. What is kept (as Delta
Spark keeps it, plus one safeguard):

* every live file and its deletion vector;
* every tombstone whose ``deletionTimestamp`` is inside the retention, and its deletion vector;
* every file (and deletion vector) named by a commit whose time (the commit file's modification
  time, made strictly increasing with the version; the storage's clock, not a writer's, so an
  in-commit timestamp is not used) is inside the retention: a writer with a slow clock may have
  stamped its removes in the past, and the versions before such a commit still read those files;
* every file a commit newer than the snapshot names, read again after the listing, just before
  the deletion: a writer that wrote a file longer than the retention ago and committed it while
  this run listed would otherwise lose it (one that commits it after the deletion still does:
  that is what a retention shorter than the longest transaction risks, and why it needs
  ``force``);
* everything younger than the retention (files being written by a writer that has not committed),
  everything in hidden directories and files (``_delta_log``, ``.``/``_`` names, except partition
  directories and ``_change_data``) and nothing outside the table root.

The retention defaults to ``delta.deletedFileRetentionDuration`` (7 days) and cannot be shorter
than it without ``force`` (Spark's retention check). Every feature of the table must be one whose
rules this engine knows (``features.check_maintainable``), whether or not the table has the
``vacuumProtocolCheck`` feature: Delta Spark checks the write protocol before every VACUUM, and a
feature this engine does not know may keep files the log does not name. The Iceberg metadata
of an Iceberg-compatible table (``metadata/``) is never deleted, and on a UniForm table
(``delta.universalFormat.enabledFormats`` naming ``iceberg``) the data files the current Iceberg
snapshot reads are kept too, though no version inside the retention reads them: only Delta's
converter rewrites that metadata, at the table's next Delta commit, so after this engine's
OPTIMIZE it still names the files OPTIMIZE removed (``read.iceberg_metadata``, ADR 0010). The
result says which files were held back and why (``IcebergHold``). A run is recorded as
``VACUUM START`` and ``VACUUM END`` commits (commitInfo only, no data change) when the engine can
write the table.

Where the files are listed and deleted is pluggable (``Sweeper``): in this process
(``InProcessSweeper``, the default) or as Spark tasks for huge tables
(``txntable.maintenance.vacuum_spark``). Every sweeper decides with the same ``VacuumRules``, a
picklable value built here from the snapshot, so a listing on another machine keeps and deletes
exactly what this process would.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.checkpoint import retention
from txntable.engine.errors import (
    InvalidArgumentError,
    RetentionTooShortError,
    UnsupportedFeatureError,
)
from txntable.engine.model.actions import (
    Action,
    AddCDCFile,
    AddFile,
    DeletionVector,
    RemoveFile,
)
from txntable.engine.model.deletion_vectors import dv_file
from txntable.engine.model.features import check_maintainable, table_features
from txntable.engine.model.iceberg_compat import ICEBERG_FEATURES
from txntable.engine.read.iceberg_metadata import METADATA_DIR, IcebergFiles, current_files
from txntable.engine.read.segment import list_all_commits, list_commits_after
from txntable.engine.read.snapshot import Snapshot, read_commits
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.storage.paths import decode_path, has_scheme
from txntable.engine.table import Table

log = logging.getLogger(__name__)

_DV_NAME = re.compile(r"deletion_vector_([0-9a-f-]{36})\.bin$")


@dataclass(frozen=True, slots=True)
class IcebergHold:
    """What VACUUM kept for Iceberg readers of a UniForm table: files no version inside the
    retention reads but the current Iceberg metadata does (ADR 0010). Delta regenerates the
    metadata at the table's next Delta commit; a VACUUM after that deletes them."""

    #: the metadata files honoured (every one that may be current), root-relative
    metadata_files: tuple[str, ...]
    snapshot_ids: tuple[int, ...]
    #: the Delta versions those metadata files converted (their ``delta-version``)
    delta_versions: tuple[int, ...]
    #: files kept that would otherwise have gone, and their bytes
    files: tuple[str, ...]
    bytes: int

    @classmethod
    def of(cls, iceberg: IcebergFiles, held: Sequence[FileInfo]) -> IcebergHold:
        snapshots = iceberg.snapshots
        return cls(
            tuple(s.metadata_file for s in snapshots),
            tuple(s.snapshot_id for s in snapshots if s.snapshot_id is not None),
            tuple(sorted({s.delta_version for s in snapshots if s.delta_version is not None})),
            tuple(f.name for f in held),
            sum(f.size for f in held),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "metadata": list(self.metadata_files),
            "snapshotIds": list(self.snapshot_ids),
            "deltaVersions": list(self.delta_versions),
            "numHeld": len(self.files),
            "heldBytes": self.bytes,
            "held": list(self.files),
        }


def iceberg_hold_note(doc: Mapping[str, Any] | None) -> str | None:
    """One sentence for a person (the CLI, a run's status message) from a VACUUM result's
    ``iceberg`` document (``IcebergHold.to_json``); None when it held nothing back."""
    if not doc or not doc.get("numHeld"):
        return None
    where = ", ".join(doc.get("metadata") or ()) or "unknown"
    versions = ", ".join(str(v) for v in doc.get("deltaVersions") or ()) or "unknown"
    return (
        f"kept {doc['numHeld']} files ({doc.get('heldBytes', 0)} bytes) that the current Iceberg "
        f"metadata still reads ({where}, converted from Delta version {versions}): Delta "
        "regenerates it at the table's next Delta commit, and a VACUUM after that deletes them"
    )


@dataclass(frozen=True, slots=True)
class VacuumResult:
    """What VACUUM deleted (or, in a dry run, would delete)."""

    retention_ms: int
    cutoff_ms: int
    files: tuple[str, ...]
    bytes: int
    dry_run: bool
    num_deleted: int
    num_kept_referenced: int
    logged: bool
    seconds: float
    #: where the files were listed and deleted (``Sweeper.name``)
    executor: str = "process"
    #: on a UniForm table: what was kept for Iceberg readers (None on other tables)
    iceberg: IcebergHold | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "retentionMs": self.retention_ms,
            "cutoffMs": self.cutoff_ms,
            "dryRun": self.dry_run,
            "numFiles": len(self.files),
            "bytes": self.bytes,
            "numDeleted": self.num_deleted,
            "numReferenced": self.num_kept_referenced,
            "logged": self.logged,
            "files": list(self.files),
            "seconds": round(self.seconds, 3),
            "executor": self.executor,
        }
        if self.iceberg is not None:
            doc["iceberg"] = self.iceberg.to_json()
        return doc


def is_hidden(name: str, partition_columns: Iterable[str]) -> bool:
    """Spark's rule for directory and file names VACUUM never enters or deletes."""
    if not name.startswith((".", "_")):
        return False
    if name.startswith(("_change_data", "_delta_index")):
        return False
    return not any(name.startswith(f"{column}=") for column in partition_columns)


@dataclass(frozen=True, slots=True)
class VacuumRules:
    """Which listed file goes: the whole decision as plain, picklable data.

    ``paths`` may be restricted to a subtree (a Spark task gets only the referenced paths under
    its directories); the decision for a file in that subtree is then unchanged."""

    cutoff_ms: int
    #: partition column names, logical and physical: ``<name>=...`` directories are not hidden
    partition_names: tuple[str, ...]
    #: relative, decoded, normalised paths some version inside the retention reads
    paths: AbstractSet[str]
    #: UUIDs of referenced deletion vectors (such a file is kept wherever it lies)
    dv_ids: AbstractSet[str]
    #: directory names VACUUM never enters although they are not hidden (``metadata``: the
    #: Iceberg metadata of an Iceberg-compatible table, which the Delta log does not reference)
    keep_dirs: tuple[str, ...] = ()
    #: on a UniForm table, what the current Iceberg metadata reads: a listed file among its
    #: paths is held back by the driver (``split_held``) rather than deleted
    iceberg: IcebergFiles | None = None

    def split_held(self, listed: Iterable[FileInfo]) -> tuple[list[FileInfo], list[FileInfo]]:
        """``(files that go, files held back for Iceberg readers)`` of the doomed files a
        sweeper listed, each sorted by name."""
        go: list[FileInfo] = []
        held: list[FileInfo] = []
        paths = self.iceberg.paths if self.iceberg is not None else frozenset()
        for info in sorted(listed, key=lambda f: f.name):
            (held if info.name in paths else go).append(info)
        return go, held

    def skip_dir(self, name: str) -> bool:
        """A directory (its own name) that VACUUM never enters."""
        return name in self.keep_dirs or is_hidden(name, self.partition_names)

    def keeps(self, name: str) -> bool:
        """Whether a version inside the retention reads the file ``name`` (relative)."""
        return _names(self.paths, self.dv_ids, name)

    def doomed(self, info: FileInfo) -> bool:
        """Whether VACUUM deletes this listed file (found by a listing that skipped
        ``skip_dir`` directories): old enough, not hidden, not referenced."""
        return (
            info.mtime_ms < self.cutoff_ms
            and not is_hidden(info.name.rsplit("/", 1)[-1], self.partition_names)
            and not self.keeps(info.name)
        )

    def in_scope(self, name: str) -> bool:
        """Whether ``name`` could be deleted at all: relative, inside the root, no hidden
        component. A check for names that travelled (a delete task re-checks what it gets)."""
        parts = name.split("/")
        if not name or name.startswith("/") or has_scheme(name):
            return False
        if any(part in ("", ".", "..") for part in parts):
            return False
        return not any(self.skip_dir(d) for d in parts[:-1]) and not is_hidden(
            parts[-1], self.partition_names
        )


class Sweeper(Protocol):
    """Lists and deletes a table's files for VACUUM; the decisions are ``VacuumRules``'s."""

    #: reported as ``VacuumResult.executor``
    name: str

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        """Every file under the root that ``rules`` deletes (in any order)."""
        ...

    def delete(self, storage: Storage, names: Sequence[str], rules: VacuumRules) -> None:
        """Delete these files (relative names, chosen by ``rules``; missing ones are fine)."""
        ...


class InProcessSweeper:
    """One recursive listing and the store's own ``delete_many``, in this process."""

    name = "process"

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        return [info for info in storage.list_tree(rules.skip_dir) if rules.doomed(info)]

    def delete(self, storage: Storage, names: Sequence[str], rules: VacuumRules) -> None:
        storage.delete_many(names)


def _names(paths: AbstractSet[str], dv_ids: AbstractSet[str], name: str) -> bool:
    """Whether the relative file ``name`` is among ``paths`` or a deletion vector of ``dv_ids``."""
    if name in paths:
        return True
    match = _DV_NAME.search(name)
    return bool(match and match[1] in dv_ids)


class _Referenced:
    """Relative, decoded paths of files some version inside the retention reads."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.root = snapshot.storage.root_uri.rstrip("/")
        self.local_root = getattr(snapshot.storage, "root_path", None)
        self.paths: set[str] = set()
        #: UUIDs of referenced deletion vectors: a file named ``...deletion_vector_<uuid>.bin``
        #: is kept wherever it lies and whatever prefix its writer gave the name
        self.dv_ids: set[str] = set()

    def add(self, raw: str | None) -> None:
        if raw is None:
            return
        decoded = decode_path(raw)
        if has_scheme(raw) or decoded.startswith("/"):
            relative = self._relative(decoded)
            if relative is None:
                return  # outside the table root: never ours to delete
            decoded = relative
        self.paths.add(os.path.normpath(decoded).replace(os.sep, "/"))

    def _relative(self, absolute: str) -> str | None:
        for root in (self.root, f"file://{self.local_root}", self.local_root):
            if root and absolute.startswith(root.rstrip("/") + "/"):
                return absolute[len(root.rstrip("/")) + 1 :]
        if self.local_root and absolute.startswith("file:"):
            path = "/" + absolute[len("file:") :].lstrip("/")
            if path.startswith(self.local_root.rstrip("/") + "/"):
                return path[len(self.local_root.rstrip("/")) + 1 :]
        return None

    def add_table(self, files: pa.Table) -> None:
        for path in files.column("path").to_pylist():
            self.add(path)
        dv = files.column("deletionVector")
        if dv.null_count == len(dv):
            return
        kinds = pc.struct_field(dv, "storageType").to_pylist()
        ids = pc.struct_field(dv, "pathOrInlineDv").to_pylist()
        for kind, ident in zip(kinds, ids, strict=True):
            self._dv(kind, ident)

    def add_actions(self, actions: Iterable[Action]) -> None:
        """Every data, change-data and deletion-vector file the actions of one commit name."""
        for action in actions:
            if isinstance(action, AddFile | RemoveFile | AddCDCFile):
                self.add(action.path)
                self.add_dv(getattr(action, "deletion_vector", None))

    def add_dv(self, dv: DeletionVector | None) -> None:
        if dv is not None:
            self._dv(dv.storage_type, dv.path_or_inline_dv)

    def _dv(self, kind: str | None, ident: str | None) -> None:
        path = dv_file(kind, ident)
        if path is None:
            return
        self.add(path)
        match = _DV_NAME.search(path)
        if match:
            self.dv_ids.add(match[1])


def _committed_since(snapshot: Snapshot, listed: Sequence[FileInfo]) -> list[FileInfo]:
    """The listed files no commit after ``snapshot`` names (read now, after the listing)."""
    commits, _ = list_commits_after(snapshot.storage, snapshot.version)
    if not commits:
        return list(listed)
    late = _Referenced(snapshot)
    for _, actions in read_commits(snapshot.storage, commits):
        late.add_actions(actions)
    kept = [f for f in listed if not _names(late.paths, late.dv_ids, f.name)]
    if len(kept) < len(listed):
        log.info(
            "vacuum of %s keeps %d files that commits after version %d named during its listing",
            snapshot.storage.root_uri,
            len(listed) - len(kept),
            snapshot.version,
        )
    return kept


def _retained_commit_paths(snapshot: Snapshot, cutoff_ms: int, keep: _Referenced) -> None:
    """Add the files named by commits whose (monotonic) time is inside the retention."""
    commits = list_all_commits(snapshot.storage)
    previous = -1
    recent = []
    for commit in commits:
        adjusted = max(commit.file.mtime_ms, previous + 1)
        previous = adjusted
        if adjusted > cutoff_ms:
            recent.append(commit)
    if not recent:
        return
    for _, actions in read_commits(snapshot.storage, recent):
        keep.add_actions(actions)


def _human(ms: int) -> str:
    """A duration for an error message: the largest unit that keeps it readable."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:g} {unit}"
    return f"{ms} ms"


def vacuum_rules(
    snapshot: Snapshot,
    *,
    retention_ms: int | None = None,
    force: bool = False,
    now_ms: int | None = None,
) -> tuple[VacuumRules, int]:
    """The decision for this snapshot and the retention used; checks, reads the log, lists
    nothing of the data and changes nothing."""
    check_maintainable(snapshot.protocol, "VACUUM")
    config = snapshot.configuration
    table_retention = retention.duration_ms(
        config, retention.DELETED_FILE_RETENTION, retention.DEFAULT_DELETED_FILE_RETENTION_MS
    )
    assert table_retention is not None
    if retention_ms is None:
        retention_ms = table_retention
    if retention_ms < 0:
        raise InvalidArgumentError(f"retention must not be negative, got {retention_ms} ms")
    if retention_ms < table_retention and not force:
        raise RetentionTooShortError(
            f"retention {_human(retention_ms)} is shorter than the table's "
            f"{retention.DELETED_FILE_RETENTION} ({_human(table_retention)}): files that "
            "concurrent readers and writers still need could be deleted",
            retention_ms=retention_ms,
            table_retention_ms=table_retention,
        )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention_ms
    keep = _Referenced(snapshot)
    keep.add_table(snapshot.files(stats=False))
    tombstones = snapshot.tombstones(stats=False)
    if tombstones.num_rows:
        recent = tombstones.filter(
            pc.fill_null(pc.greater(tombstones.column("deletionTimestamp"), cutoff), True)
        )
        keep.add_table(recent)
    _retained_commit_paths(snapshot, cutoff, keep)
    partition_columns = snapshot.partition_columns
    physical = [f.physical_name for f in snapshot.fields if f.name in partition_columns]
    rules = VacuumRules(
        cutoff_ms=cutoff,
        partition_names=(*partition_columns, *physical),
        paths=keep.paths,
        dv_ids=keep.dv_ids,
        keep_dirs=(ICEBERG_METADATA_DIR,) if keeps_iceberg_metadata(snapshot) else (),
        iceberg=current_files(snapshot.storage) if uniform_iceberg(snapshot) else None,
    )
    return rules, retention_ms


#: where Delta's UniForm writes the Iceberg metadata of a table (its root's ``metadata``)
ICEBERG_METADATA_DIR = METADATA_DIR


def uniform_iceberg(snapshot: Snapshot) -> bool:
    """Whether Delta keeps Iceberg metadata for this table after its commits (UniForm:
    ``delta.universalFormat.enabledFormats`` names ``iceberg``), so VACUUM holds back the files
    that metadata reads. With UniForm off nothing regenerates it, and VACUUM, like Delta's,
    keeps only what Delta versions read."""
    formats = snapshot.configuration.get("delta.universalFormat.enabledFormats") or ""
    return "iceberg" in (f.strip().lower() for f in formats.split(","))


def keeps_iceberg_metadata(snapshot: Snapshot) -> bool:
    """Whether the table may hold Iceberg metadata VACUUM must leave alone: it supports an
    Iceberg compatibility feature or names Iceberg among ``delta.universalFormat.enabledFormats``
    (the log references none of those files, and an old one may still be Iceberg's current)."""
    features = table_features(snapshot.protocol)
    formats = snapshot.configuration.get("delta.universalFormat.enabledFormats") or ""
    return bool(features & ICEBERG_FEATURES) or "iceberg" in formats.lower()


def plan_vacuum(
    snapshot: Snapshot,
    *,
    retention_ms: int | None = None,
    force: bool = False,
    now_ms: int | None = None,
    sweeper: Sweeper | None = None,
) -> tuple[list[FileInfo], int, int, int]:
    """(files to delete, retention, cutoff, number of referenced paths): pure listing, no change.
    Files the current Iceberg metadata of a UniForm table reads are not among them."""
    rules, retention_ms = vacuum_rules(
        snapshot, retention_ms=retention_ms, force=force, now_ms=now_ms
    )
    listed = (sweeper or InProcessSweeper()).doomed(snapshot.storage, rules)
    doomed, _ = rules.split_held(_committed_since(snapshot, listed))
    return doomed, retention_ms, rules.cutoff_ms, len(rules.paths)


def vacuum(
    snapshot: Snapshot,
    *,
    retention_ms: int | None = None,
    force: bool = False,
    dry_run: bool = False,
    now_ms: int | None = None,
    sweeper: Sweeper | None = None,
) -> VacuumResult:
    """Delete (or, with ``dry_run``, list) the files no version inside the retention reads.

    ``snapshot`` should be the latest one: files removed after it are still live in it, so a
    concurrent OPTIMIZE or DELETE can never make this run delete a file a newer version reads.
    ``sweeper`` lists and deletes (default: in this process)."""
    started = time.perf_counter()
    sweeper = sweeper or InProcessSweeper()
    rules, retention_used = vacuum_rules(
        snapshot, retention_ms=retention_ms, force=force, now_ms=now_ms
    )
    cutoff, referenced = rules.cutoff_ms, len(rules.paths)
    listed = sweeper.doomed(snapshot.storage, rules)
    doomed, held = rules.split_held(_committed_since(snapshot, listed))
    iceberg = IcebergHold.of(rules.iceberg, held) if rules.iceberg is not None else None
    if held:
        log.info(
            "vacuum of %s keeps %d files the current Iceberg metadata reads",
            snapshot.storage.root_uri,
            len(held),
        )
    total = sum(f.size for f in doomed)
    names = tuple(f.name for f in doomed)
    sweep = not dry_run
    logged = sweep and _delete_recorded(
        snapshot, sweeper, rules, names, total, force=force, retention_ms=retention_used
    )
    return VacuumResult(
        retention_ms=retention_used,
        cutoff_ms=cutoff,
        files=names,
        bytes=total,
        dry_run=not sweep,
        num_deleted=len(doomed) if sweep else 0,
        num_kept_referenced=referenced,
        logged=logged,
        seconds=time.perf_counter() - started,
        executor=sweeper.name,
        iceberg=iceberg,
    )


def _delete_recorded(
    snapshot: Snapshot,
    sweeper: Sweeper,
    rules: VacuumRules,
    names: tuple[str, ...],
    total: int,
    *,
    force: bool,
    retention_ms: int,
) -> bool:
    """Delete ``names`` (``total`` bytes) between a VACUUM START and a VACUUM END commit, as
    Delta does; returns whether the run is in the log (False when this engine cannot write
    the table: the files are deleted all the same)."""
    table = Table.from_snapshot(snapshot)  # its commits refresh this snapshot, not reload
    default_ms = retention.duration_ms(
        snapshot.configuration,
        retention.DELETED_FILE_RETENTION,
        retention.DEFAULT_DELETED_FILE_RETENTION_MS,
    )
    logged = _record(
        table,
        "VACUUM START",
        {
            "retentionCheckEnabled": not force,
            "specifiedRetentionMillis": retention_ms,
            "defaultRetentionMillis": default_ms,
        },
        {"numFilesToDelete": len(names), "sizeOfDataToDelete": total},
    )
    storage = snapshot.storage
    sweeper.delete(storage, names, rules)
    if logged:
        _record(
            table,
            "VACUUM END",
            {"status": "COMPLETED"},
            {"numDeletedFiles": len(names), "numVacuumedDirectories": 0},
        )
    log.info("vacuum of %s deleted %d files (%d bytes)", storage.root_uri, len(names), total)
    return logged


def _record(table: Table, operation: str, params: dict[str, Any], metrics: dict[str, Any]) -> bool:
    """A commitInfo-only commit; False (and a log line) when this engine cannot write the table."""
    try:
        txn = table.transaction()
        txn.commit(operation, params, metrics)
    except UnsupportedFeatureError as exc:
        log.warning("vacuum of %s is not recorded in the log: %s", table.uri, exc)
        return False
    return True
