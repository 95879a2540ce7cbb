"""Table storage: the few operations the log needs, on top of fsspec.

The engine reads and lists through one small interface so that snapshot code never cares
whether the table lives on local disk, in memory or in an object store. The one atomic primitive
that commits need, "create this file only if it does not exist", is part of the interface:
local disk implements it with a hard link (exclusive across processes, as delta-rs does), the
in-memory store with a lock; stores that cannot guarantee exclusivity say so
(``atomic_put_if_absent = False``) and the commit path refuses to use them for concurrent writers.
Object stores implement the interface in ``s3`` and ``azure``; ``factory.open_storage``
picks the store for a URI, so this module never imports its own implementations.
"""

from __future__ import annotations

import errno
import os
import posixpath
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any

from txntable.engine.errors import StorageError, WriteRefusedError
from txntable.engine.storage.paths import LOG_DIR, hadoop_checksum_name

_DELETE_WORKERS = 16


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A listed file: its name within the listed directory, size and modification time (ms)."""

    name: str
    size: int
    mtime_ms: int


class FileExistsInStoreError(StorageError):
    """``write_if_absent`` found the file already there (someone else won the version)."""


class Storage(ABC):
    """Operations on one table root. Paths are relative to the root, ``/``-separated."""

    #: True when ``write_if_absent`` is atomic and exclusive across processes.
    atomic_put_if_absent: bool = False

    def __init__(self, root_uri: str) -> None:
        self.root_uri = root_uri.rstrip("/")

    def uri(self, relative: str) -> str:
        """Absolute URI of a path relative to the table root."""
        return f"{self.root_uri}/{relative.lstrip('/')}"

    @abstractmethod
    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        """Files (not directories) directly in a directory, sorted by name, names >= start_at.

        A missing directory lists as empty.
        """

    @abstractmethod
    def read(self, relative: str) -> bytes:
        """Whole file contents; raises ``FileNotFoundError`` when absent."""

    @abstractmethod
    def open_input(self, relative: str) -> IO[bytes] | str:
        """Something ``pyarrow.parquet`` can read: a local path or a binary file object."""

    def read_tail(self, relative: str, length: int) -> bytes:
        """The last ``length`` bytes of a file (all of it when shorter): a Parquet footer
        without the data before it. Object stores override this with one ranged request;
        raises ``FileNotFoundError`` when absent."""
        return self.read(relative)[-length:]

    @abstractmethod
    def write_if_absent(self, relative: str, data: bytes) -> None:
        """Create the file atomically; raise ``FileExistsInStoreError`` if it exists."""

    @abstractmethod
    def write(self, relative: str, data: bytes) -> None:
        """Create or replace the file; readers never observe a partial file."""

    @abstractmethod
    def delete(self, relative: str) -> None:
        """Delete the file; a missing file is not an error."""

    def write_new(self, relative: str, data: bytes) -> None:
        """Create a file under a fresh unique name nothing references yet (a data file).

        No reader can see it before a commit names it, so it needs no atomic replace; stores
        may write it directly.
        """
        self.write(relative, data)

    def list_log(self, start_at: str = "") -> list[FileInfo]:
        return self.list_dir(LOG_DIR, start_at)

    def delete_many(self, relatives: Sequence[str]) -> None:
        """Delete many files (missing ones are fine): in parallel, since each delete on an
        object store is a round trip."""
        if not relatives:
            return
        with ThreadPoolExecutor(max_workers=min(_DELETE_WORKERS, len(relatives))) as pool:
            list(pool.map(self.delete, relatives))

    def list_tree(self, skip_dir: Callable[[str], bool] | None = None) -> Iterator[FileInfo]:
        """Every file under the root, ``name`` relative to it (``/``-separated), for VACUUM.

        ``skip_dir`` gets a directory's own name; a True answer leaves its whole subtree out
        (stores without real directories filter by each path component instead)."""
        raise StorageError(f"{type(self).__name__} cannot list a whole table")

    def read_log(self, name: str) -> bytes:
        return self.read(f"{LOG_DIR}/{name}")

    def has_log_files(self) -> bool:
        """Whether ``_delta_log`` holds any file (cheaper than ``list_log`` where it can be)."""
        return bool(self.list_log())


def _refused(exc: OSError) -> bool:
    """Whether ``exc`` refused a write outright: nothing was stored (no access, read-only)."""
    return isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EPERM)


@contextmanager
def _io_errors(what: str) -> Iterator[None]:
    try:
        yield
    except (FileNotFoundError, FileExistsInStoreError, StorageError):
        raise
    except PermissionError as exc:
        raise StorageError(f"permission denied while {what}: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"storage error while {what}: {exc}") from exc


#: ``LocalStorage.delete_many`` lists a directory for its checksum files only up to this many
#: entries per name it deletes there: listing costs ~0.7 us an entry, a failed unlink ~7 us
CHECKSUM_SCAN_FACTOR = 4


class LocalStorage(Storage):
    """Local (POSIX) disk, using the OS directly: it is the hot path for tests and the demo.

    Hadoop's ``LocalFileSystem`` (delta-spark, every Spark job on a ``file:`` table) keeps a
    checksum file ``.<name>.crc`` beside each file it writes, and refuses to read a file that
    no longer matches it (``ChecksumException``); a missing checksum file is tolerated. So
    whatever this store creates, replaces or deletes takes the file's checksum file with it,
    removing it, never writing one (``_drop_checksum``): a removed checksum is never wrong.
    """

    atomic_put_if_absent = True

    def __init__(self, root_path: str, fsync: bool = True) -> None:
        self.root_path = os.path.abspath(root_path)
        #: fsync files and directories so a commit survives power loss. ``False`` trades that
        #: for speed, as delta-rs and Hadoop's local filesystem do (they never fsync).
        self.fsync = fsync
        super().__init__("file://" + self.root_path)

    def _abs(self, relative: str) -> str:
        return os.path.join(self.root_path, relative)

    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        out: list[FileInfo] = []
        with _io_errors(f"listing {relative_dir}"):
            try:
                entries = os.scandir(self._abs(relative_dir))
            except FileNotFoundError:
                if not os.path.isdir(self.root_path):
                    raise StorageError(f"no such directory: {self.root_path}") from None
                return out
            with entries:
                for entry in entries:
                    if entry.name < start_at:
                        continue
                    try:
                        if not entry.is_file():
                            continue
                        st = entry.stat()
                    except FileNotFoundError:
                        continue  # deleted between listing and stat
                    out.append(FileInfo(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
        out.sort(key=lambda f: f.name)
        return out

    def list_tree(self, skip_dir: Callable[[str], bool] | None = None) -> Iterator[FileInfo]:
        pending = [""]
        while pending:
            relative = pending.pop()
            with _io_errors(f"listing {relative or '/'}"):
                try:
                    entries = list(os.scandir(self._abs(relative) if relative else self.root_path))
                except FileNotFoundError:
                    continue  # deleted meanwhile
            for entry in entries:
                name = f"{relative}/{entry.name}" if relative else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if skip_dir is None or not skip_dir(entry.name):
                            pending.append(name)
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat()
                        yield FileInfo(name, st.st_size, st.st_mtime_ns // 1_000_000)
                except FileNotFoundError:
                    continue

    def delete_many(self, relatives: Sequence[str]) -> None:
        # An unlink is a few microseconds: threads only add contention (serial: 6x faster).
        # Hadoop's checksum files (``.name.crc``, each deleted before its file, ``delete``'s
        # order) are looked up by listing the directory once rather than tried per file, where
        # that is cheaper: most tables have none, and the failed unlink per file was 20-25% of
        # a 50,000-file VACUUM's time. A directory far bigger than what this call deletes in it
        # (a 1,000-name chunk of a flat 100,000-file table) is not listed to the end: past
        # ``CHECKSUM_SCAN_FACTOR`` entries per name, trying each checksum costs less.
        by_dir: dict[str, list[str]] = {}
        for relative in relatives:
            by_dir.setdefault(posixpath.dirname(relative), []).append(relative)
        for directory, names in by_dir.items():
            checksums = self._checksums_in(directory, CHECKSUM_SCAN_FACTOR * len(names))
            for relative in names:
                target = self._abs(relative)
                checksum = hadoop_checksum_name(posixpath.basename(relative))
                with _io_errors(f"deleting {relative}"):
                    if checksums is None or checksum in checksums:
                        with suppress(FileNotFoundError):
                            os.unlink(os.path.join(os.path.dirname(target), checksum))
                    with suppress(FileNotFoundError):
                        os.unlink(target)

    def _checksums_in(self, relative_dir: str, budget: int) -> set[str] | None:
        """The names of the Hadoop checksum files in a directory (none if it is gone), or
        ``None`` when it holds more than ``budget`` entries (not listed to the end)."""
        found: set[str] = set()
        with _io_errors(f"listing {relative_dir or '/'}"):
            try:
                with os.scandir(self._abs(relative_dir) if relative_dir else self.root_path) as it:
                    for seen, entry in enumerate(it):
                        if seen >= budget:
                            return None
                        if entry.name.startswith(".") and entry.name.endswith(".crc"):
                            found.add(entry.name)
            except (FileNotFoundError, NotADirectoryError):
                return set()
        return found

    def has_log_files(self) -> bool:
        # no stat per file: a 10,000-commit log lists in ~6 ms instead of ~50 ms
        with _io_errors(f"listing {LOG_DIR}"):
            try:
                with os.scandir(self._abs(LOG_DIR)) as entries:
                    return any(entry.is_file() for entry in entries)
            except FileNotFoundError:
                if not os.path.isdir(self.root_path):
                    raise StorageError(f"no such directory: {self.root_path}") from None
                return False

    def read(self, relative: str) -> bytes:
        with _io_errors(f"reading {relative}"), open(self._abs(relative), "rb") as fh:
            return fh.read()

    def open_input(self, relative: str) -> str:
        return self._abs(relative)

    def read_tail(self, relative: str, length: int) -> bytes:
        with _io_errors(f"reading {relative}"), open(self._abs(relative), "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - length))
            return fh.read()

    def write_if_absent(self, relative: str, data: bytes) -> None:
        target = self._abs(relative)
        directory, name = os.path.split(target)
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        with _io_errors(f"writing {relative}"):
            try:
                os.makedirs(directory, exist_ok=True)
                if os.path.lexists(target):  # no temporary file for a version already won
                    raise FileExistsInStoreError(f"{relative} already exists")
                self._write_synced(tmp, data)
                self.place(tmp, relative, replace=False)
            except OSError as exc:
                if not _refused(exc):
                    raise
                raise WriteRefusedError(
                    f"permission denied while writing {relative}: {exc}"
                    if isinstance(exc, PermissionError)
                    else f"storage refused writing {relative}: {exc}"
                ) from exc
            finally:
                with suppress(FileNotFoundError):
                    os.unlink(tmp)

    def write(self, relative: str, data: bytes) -> None:
        target = self._abs(relative)
        directory, name = os.path.split(target)
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        with _io_errors(f"writing {relative}"):
            os.makedirs(directory, exist_ok=True)
            try:
                self._write_synced(tmp, data)
                self.place(tmp, relative, replace=True)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)

    def place(self, tmp: str, relative: str, *, replace: bool) -> None:
        """Move the finished, synced temporary file ``tmp`` (a path in the target's directory)
        to ``relative`` atomically: over an existing file with ``replace``, else only if
        nothing is there (``FileExistsInStoreError``; ``tmp`` is then left for the caller).

        Hadoop's checksum file of the target goes in the same step. A replace removes it
        before and again after the rename: a Hadoop reader in between reads the old bytes
        without a checksum, then the new bytes without one, never new bytes against the old
        checksum; the second removal takes a checksum a Hadoop writer renamed in meanwhile
        for the bytes this rename replaced. A create removes a stale one (its file was deleted
        by something that left it) before the link: Hadoop would refuse the new file."""
        target = self._abs(relative)
        _drop_checksum(target)
        if replace:
            os.replace(tmp, target)
            _drop_checksum(target)
        else:
            try:
                os.link(tmp, target)  # atomic: after an error here the target was not created
            except FileExistsError:
                raise FileExistsInStoreError(f"{relative} already exists") from None
        self._fsync_dir(os.path.dirname(target))

    def delete(self, relative: str) -> None:
        # Hadoop's order (ChecksumFileSystem.delete): the checksum first, so a crash between
        # the two leaves a file without a checksum (read as is), never an orphan checksum that
        # would make Hadoop refuse a file created later under the same name
        target = self._abs(relative)
        with _io_errors(f"deleting {relative}"):
            _drop_checksum(target)
            with suppress(FileNotFoundError):
                os.unlink(target)

    def write_new(self, relative: str, data: bytes) -> None:
        # Content synced, directory not: the commit that will name this file fsyncs the log
        # directory, and journaling filesystems commit earlier metadata changes with it.
        target = self._abs(relative)
        with _io_errors(f"writing {relative}"):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self._write_synced(target, data)

    def _write_synced(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _fsync_dir(self, directory: str) -> None:
        if not self.fsync:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _drop_checksum(path: str) -> None:
    """Remove Hadoop's checksum file of ``path`` (an absolute local path), if there is one."""
    directory, name = os.path.split(path)
    with suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, hadoop_checksum_name(name)))


class FsspecStorage(Storage):
    """Any fsspec filesystem, for reading and listing.

    Plain fsspec has no conditional create, so ``write_if_absent`` is only as safe as the
    filesystem: stores that need more (S3's ``If-None-Match``) get their own class.
    """

    def __init__(self, fs: Any, root_path: str, root_uri: str) -> None:
        super().__init__(root_uri)
        self.fs = fs
        self.root_path = root_path.rstrip("/")

    def _abs(self, relative: str) -> str:
        return f"{self.root_path}/{relative.lstrip('/')}"

    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        out: list[FileInfo] = []
        with _io_errors(f"listing {relative_dir}"):
            directory = self._abs(relative_dir)
            # listing caches (gcsfs, adlfs, ...) would hide new commits from a refresh
            self.fs.invalidate_cache(directory)
            try:
                entries = self.fs.ls(directory, detail=True)
            except FileNotFoundError:
                return out
        for entry in entries:
            if entry.get("type") != "file":
                continue
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            if name < start_at:
                continue
            out.append(FileInfo(name, int(entry.get("size") or 0), _mtime_ms(entry)))
        out.sort(key=lambda f: f.name)
        return out

    def list_tree(self, skip_dir: Callable[[str], bool] | None = None) -> Iterator[FileInfo]:
        with _io_errors("listing the table"):
            self.fs.invalidate_cache(self.root_path)
            found = self.fs.find(self.root_path, detail=True)
        for path, entry in found.items():
            if entry.get("type") != "file":
                continue
            name = str(path)[len(self.root_path) :].strip("/")
            if skip_dir is not None and any(skip_dir(d) for d in name.split("/")[:-1]):
                continue
            yield FileInfo(name, int(entry.get("size") or 0), _mtime_ms(entry))

    def read(self, relative: str) -> bytes:
        with _io_errors(f"reading {relative}"):
            data = self.fs.cat_file(self._abs(relative))
        return bytes(data)

    def open_input(self, relative: str) -> IO[bytes]:
        with _io_errors(f"opening {relative}"):
            fh: IO[bytes] = self.fs.open(self._abs(relative), "rb")
        return fh

    def read_tail(self, relative: str, length: int) -> bytes:
        with _io_errors(f"reading {relative}"):
            return bytes(self.fs.tail(self._abs(relative), length))

    def write_if_absent(self, relative: str, data: bytes) -> None:
        raise StorageError(
            f"{type(self.fs).__name__} offers no atomic put-if-absent; "
            "refusing to commit (see the single-writer option)"
        )

    def write(self, relative: str, data: bytes) -> None:
        with _io_errors(f"writing {relative}"):
            self.fs.pipe_file(self._abs(relative), data)

    def delete(self, relative: str) -> None:
        with _io_errors(f"deleting {relative}"), suppress(FileNotFoundError):
            self.fs.rm_file(self._abs(relative))


class MemoryStorage(FsspecStorage):
    """fsspec's in-memory filesystem; put-if-absent is atomic within the process (tests)."""

    atomic_put_if_absent = True
    _lock = threading.Lock()

    def write_if_absent(self, relative: str, data: bytes) -> None:
        path = self._abs(relative)
        with self._lock:
            if self.fs.exists(path):
                raise FileExistsInStoreError(f"{relative} already exists")
            self.fs.pipe_file(path, data)


def _mtime_ms(entry: Mapping[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = entry.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        try:
            return int(float(value) * 1000)
        except (TypeError, ValueError):
            continue
    return 0
