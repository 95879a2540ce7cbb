"""VACUUM's listing and deletes as Spark tasks, for tables too big for one process.

In-process VACUUM (``engine/vacuum.py``) walks the whole tree in one recursive listing (one
paginated LIST on S3) and deletes from one process: minutes for a table of millions of files.
This ``Sweeper`` spreads both over Spark tasks; the decision stays the engine's ``VacuumRules``,
so it deletes exactly what the in-process path would:

1. The driver lists the table root only, not recursively. Its directories (the top-level
   partition directories, deletion-vector prefix directories, ...) are the units of work; hidden
   ones (``_delta_log``, ``.``/``_`` names) are skipped by ``VacuumRules.skip_dir``, as the
   recursive listing skips them. Files directly in the root are decided on the driver: they came
   with that one listing.
2. Each task lists its directories recursively on an executor and keeps only what
   ``VacuumRules.doomed`` says goes; just those files' ``(name, size, mtime)`` come back.

   Filtering on the executors, not on the driver: the listing of a big table is mostly live
   files, and bringing every row back (1,000,000 rows are ~150 MB of Python objects) would move
   and hold the whole listing only to drop most of it. The referenced paths are not broadcast
   either: as a Python set a million paths take ~100 MB in every Python worker, while a task
   needs only those under its own directories. The driver splits the referenced set by top-level
   directory and each path travels once, with the task that lists that directory. Only the
   referenced deletion-vector UUIDs are broadcast: a DV file is kept by its UUID wherever it
   lies (one per file with a deletion vector, so usually far fewer).
3. The driver records ``VACUUM START`` (count and bytes, as in-process), then the doomed names go
   back to executors in chunks of 1,000 and are deleted there (each task re-checks that every
   name is relative, inside the root and not hidden); then ``VACUUM END``.

Limits: the root's own files are listed by the driver (a table that keeps all its files in the
root gains only the parallel deletes; Delta Spark lists a directory in one task too), and
``memory://`` tables live in one process, so they are refused. Local disk, S3 and Azure are
supported (the stores ``open_storage`` opens for writing).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from txntable import interrupts
from txntable.engine.errors import StorageError
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.azure import AzureStorage
from txntable.engine.storage.base import FileInfo, LocalStorage, Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.s3 import S3Storage
from txntable.engine.vacuum import VacuumRules
from txntable.maintenance.errors import MaintenanceError, SparkJobError
from txntable.maintenance.spark_support import location, spark_error_line

log = logging.getLogger(__name__)

#: Below this many files in the log's state (live plus tombstones), one process lists faster
#: than Spark tasks start; the optimize job's ``--vacuum-spark-min-files`` overrides it.
SPARK_MIN_FILES = 100_000
#: names per delete task chunk
DELETE_CHUNK = 1000
#: tasks per core for the listing and the deletes (smooths uneven directories)
_TASKS_PER_CORE = 4


def estimated_files(snapshot: Snapshot) -> int:
    """Files the log knows of (live and tombstones): what decides whether Spark pays off."""
    return snapshot.num_files + int(snapshot.tombstones(stats=False).num_rows)


def wants_spark(snapshot: Snapshot, min_files: int = SPARK_MIN_FILES) -> bool:
    """Whether VACUUM of this snapshot should run as Spark tasks."""
    return estimated_files(snapshot) >= min_files


def _subtree(storage: Storage, directory: str, options: Mapping[str, Any]) -> Storage:
    """The same store rooted at ``directory`` (a top-level directory of ``storage``), on the
    same client."""
    if isinstance(storage, LocalStorage):
        return LocalStorage(os.path.join(storage.root_path, directory), fsync=False)
    if isinstance(storage, S3Storage):
        return S3Storage(f"{storage.root_uri}/{directory}", client=storage.client)
    if isinstance(storage, AzureStorage):  # the options name the account, the client is reused
        return AzureStorage(f"{storage.root_uri}/{directory}", options, client=storage.client)
    raise MaintenanceError(f"VACUUM on Spark cannot list a {type(storage).__name__} table")


def list_root(storage: Storage) -> tuple[list[FileInfo], list[str]]:
    """The files directly in the root and the names of its directories (one listing)."""
    try:
        if isinstance(storage, LocalStorage):
            return _list_local_root(storage.root_path)
        if isinstance(storage, S3Storage):
            return _list_s3_root(storage)
        if isinstance(storage, AzureStorage):
            return _list_azure_root(storage)
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(f"storage error while listing the table root: {exc}") from exc
    raise MaintenanceError(f"VACUUM on Spark cannot list a {type(storage).__name__} table")


def _list_local_root(root: str) -> tuple[list[FileInfo], list[str]]:
    # the entry tests of LocalStorage.list_tree: symbolic links are neither entered nor deleted
    files: list[FileInfo] = []
    dirs: list[str] = []
    with os.scandir(root) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat()
                    files.append(FileInfo(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
            except FileNotFoundError:
                continue
    return files, dirs


def _list_s3_root(storage: S3Storage) -> tuple[list[FileInfo], list[str]]:
    prefix = f"{storage.prefix}/" if storage.prefix else ""
    files: list[FileInfo] = []
    dirs: list[str] = []
    try:
        pages = storage.client.get_paginator("list_objects_v2").paginate(
            Bucket=storage.bucket, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            for common in page.get("CommonPrefixes", ()):
                name = common["Prefix"][len(prefix) :].rstrip("/")
                if name:
                    dirs.append(name)
            for obj in page.get("Contents", ()):
                name = obj["Key"][len(prefix) :]
                if name and "/" not in name:
                    mtime = int(obj["LastModified"].timestamp() * 1000)
                    files.append(FileInfo(name, int(obj["Size"]), mtime))
    except Exception as exc:
        raise StorageError(f"listing the table root failed: {type(exc).__name__}") from exc
    return files, dirs


def _list_azure_root(storage: AzureStorage) -> tuple[list[FileInfo], list[str]]:
    prefix = f"{storage.prefix}/" if storage.prefix else ""
    files: list[FileInfo] = []
    dirs: list[str] = []
    try:
        for item in storage.client.walk_blobs(name_starts_with=prefix, delimiter="/"):
            name = str(item.name)[len(prefix) :]
            if not hasattr(item, "size"):  # a BlobPrefix: a "directory"
                if name.rstrip("/"):
                    dirs.append(name.rstrip("/"))
            elif name and "/" not in name:
                mtime = int(item.last_modified.timestamp() * 1000)
                files.append(FileInfo(name, int(item.size), mtime))
    except Exception as exc:
        raise StorageError(f"listing the table root failed: {type(exc).__name__}") from exc
    return files, dirs


# -- what runs on the executors ---------------------------------------------------------------
def find_doomed(
    groups: Sequence[tuple[str, Sequence[str]]], common: Mapping[str, Any], dv_ids: Iterable[str]
) -> list[tuple[str, int, int]]:
    """One listing task: ``(directory, referenced paths under it)`` pairs in, the doomed files
    of those directories out as ``(name, size, mtime_ms)``."""
    storage = open_storage(common["location"], common["storage_options"])
    dv = frozenset(dv_ids)
    out: list[tuple[str, int, int]] = []
    for directory, paths in groups:
        rules = VacuumRules(
            cutoff_ms=common["cutoff_ms"],
            partition_names=tuple(common["partition_names"]),
            paths=frozenset(paths),
            dv_ids=dv,
            keep_dirs=tuple(common.get("keep_dirs") or ()),
        )
        for info in _subtree(storage, directory, common["storage_options"]).list_tree(
            rules.skip_dir
        ):
            full = FileInfo(f"{directory}/{info.name}", info.size, info.mtime_ms)
            if rules.doomed(full):
                out.append((full.name, full.size, full.mtime_ms))
    return out


def delete_chunks(chunks: Sequence[Sequence[str]], common: Mapping[str, Any]) -> int:
    """One delete task: every name is checked before any of its chunk goes."""
    storage = open_storage(common["location"], common["storage_options"])
    scope = VacuumRules(
        0,
        tuple(common["partition_names"]),
        frozenset(),
        frozenset(),
        tuple(common.get("keep_dirs") or ()),
    )
    done = 0
    for chunk in chunks:
        bad = [name for name in chunk if not scope.in_scope(name)]
        if bad:
            raise MaintenanceError(f"refusing to delete {bad[0]!r}: hidden or outside the table")
        storage.delete_many(chunk)
        done += len(chunk)
    return done


def _round_robin(items: Sequence[Any], slices: int) -> list[list[Any]]:
    return [list(items[k::slices]) for k in range(slices)]


class SparkSweeper:
    """Lists top-level directories and deletes in chunks as Spark tasks (module docstring)."""

    name = "spark"

    def __init__(
        self,
        spark: Any | None = None,
        master: str = "local[*]",
        storage_options: Mapping[str, Any] | None = None,
        conf: Mapping[str, str] | None = None,
        chunk_size: int = DELETE_CHUNK,
    ) -> None:
        if chunk_size < 1:
            raise MaintenanceError(f"delete chunk size must be at least 1, got {chunk_size}")
        self._spark = spark
        self._owns_session = spark is None
        self.master = master
        self.storage_options = dict(storage_options or {})
        self.conf = dict(conf or {})
        self.chunk_size = chunk_size
        #: figures of the last run (for logs and tests): directories listed, tasks, delete tasks
        self.last: dict[str, int] = {}

    @property
    def spark(self) -> Any:
        """The session: the one passed in, the one already running here, or a new one."""
        if self._spark is None:
            from pyspark.sql import SparkSession

            from txntable.maintenance.spark_session import start_session

            # a session already active in this process (a caller's, a test's) is used, never
            # stopped by close()
            self._owns_session = SparkSession.getActiveSession() is None
            self._spark = start_session(self.master, "txntable-vacuum", self.conf)
        return self._spark

    def _slices(self, n: int) -> int:
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        return max(1, min(n, cores * _TASKS_PER_CORE))

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        common = {
            "location": location(storage),
            "storage_options": self.storage_options,
            "cutoff_ms": rules.cutoff_ms,
            "partition_names": list(rules.partition_names),
            "keep_dirs": list(rules.keep_dirs),
        }
        root_files, dirs = list_root(storage)
        out = [info for info in root_files if rules.doomed(info)]
        dirs = sorted(d for d in dirs if not rules.skip_dir(d))
        self.last = {"directories": len(dirs), "listTasks": 0, "deleteTasks": 0}
        if not dirs:
            return out
        by_dir: dict[str, list[str]] = {d: [] for d in dirs}
        for path in rules.paths:
            top, sep, _ = path.partition("/")
            if sep and top in by_dir:
                by_dir[top].append(path)
        # the directories with most referenced paths first, dealt round-robin: even tasks
        groups = sorted(by_dir.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        slices = _round_robin(groups, self._slices(len(groups)))
        sc = self.spark.sparkContext
        sc.setJobDescription(f"txntable VACUUM: list {len(dirs)} directories")
        dv_ids = sc.broadcast(sorted(rules.dv_ids))
        try:
            rows = (
                sc.parallelize(slices, len(slices))
                .flatMap(lambda groups: find_doomed(groups, common, dv_ids.value))
                .collect()
            )
        except Exception as exc:
            interrupts.reraise(exc)  # py4j's clean-up after Ctrl-C failed: still Ctrl-C
            raise SparkJobError(f"VACUUM's listing job failed: {spark_error_line(exc)}") from exc
        finally:
            dv_ids.unpersist()
        self.last["listTasks"] = len(slices)
        log.info(
            "vacuum of %s listed %d directories in %d Spark tasks: %d files go",
            storage.root_uri,
            len(dirs),
            len(slices),
            len(out) + len(rows),
        )
        out.extend(FileInfo(name, size, mtime) for name, size, mtime in rows)
        return out

    def delete(self, storage: Storage, names: Sequence[str], rules: VacuumRules) -> None:
        if not names:
            return
        common = {
            "location": location(storage),
            "storage_options": self.storage_options,
            "partition_names": list(rules.partition_names),
            "keep_dirs": list(rules.keep_dirs),
        }
        chunks = [
            list(names[i : i + self.chunk_size]) for i in range(0, len(names), self.chunk_size)
        ]
        slices = _round_robin(chunks, self._slices(len(chunks)))
        sc = self.spark.sparkContext
        sc.setJobDescription(f"txntable VACUUM: delete {len(names)} files")
        try:
            done = sum(
                sc.parallelize(slices, len(slices))
                .map(lambda part: delete_chunks(part, common))
                .collect()
            )
        except Exception as exc:
            interrupts.reraise(exc)  # py4j's clean-up after Ctrl-C failed: still Ctrl-C
            raise SparkJobError(f"VACUUM's delete job failed: {spark_error_line(exc)}") from exc
        self.last["deleteTasks"] = len(slices)
        if done != len(names):  # pragma: no cover - a task returned without raising
            raise MaintenanceError(f"VACUUM deleted {done} of {len(names)} files")

    def close(self) -> None:
        """Stop the session if this sweeper started it (aborting it during Ctrl-C)."""
        if self._owns_session and self._spark is not None:
            from txntable.maintenance.spark_session import stop

            session, self._spark = self._spark, None
            stop(session)
