"""A storage wrapper that fails on purpose, for testing what the commit path does on bad days.

Wraps any ``Storage`` and, for paths matching a pattern, can: fail a write before it happens
(nothing lands), lose the response of a write that did land (the caller sees an error although
the file is there, as after an S3 timeout), or answer "already exists" for a write that landed
(what a client's automatic retry of a landed PUT sees). Every write attempt is recorded.
``read_only_dir`` makes a real directory refuse new files, for the write refused outright.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from txntable.engine.errors import StorageError
from txntable.engine.storage.base import FileExistsInStoreError, FileInfo, Storage

FAIL_BEFORE = "fail-before"  # raise StorageError; nothing written
LOST_RESPONSE = "lost-response"  # write lands, then raise StorageError (timeout)
LANDED_EXISTS = "landed-exists"  # write lands, then raise FileExistsInStoreError (client retry)
FAIL_READ = "fail-read"  # a read raises StorageError


@dataclass
class Fault:
    kind: str
    pattern: str
    times: int = 1


@dataclass
class FaultyStorage(Storage):
    """Delegates to ``inner``; consumes queued faults whose glob matches the relative path."""

    inner: Storage
    faults: list[Fault] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)  # (path, outcome)

    def __post_init__(self) -> None:
        super().__init__(self.inner.root_uri)
        self.atomic_put_if_absent = self.inner.atomic_put_if_absent
        self._lock = threading.Lock()

    def inject(self, kind: str, pattern: str = "_delta_log/*.json", times: int = 1) -> None:
        self.faults.append(Fault(kind, pattern, times))

    def _take(self, kinds: tuple[str, ...], relative: str) -> str | None:
        with self._lock:
            for fault in self.faults:
                if fault.kind in kinds and fnmatch.fnmatch(relative, fault.pattern):
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault.kind
        return None

    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        return self.inner.list_dir(relative_dir, start_at)

    def read(self, relative: str) -> bytes:
        if self._take((FAIL_READ,), relative):
            raise StorageError(f"injected read failure for {relative}")
        return self.inner.read(relative)

    def open_input(self, relative: str) -> IO[bytes] | str:
        return self.inner.open_input(relative)

    def write_if_absent(self, relative: str, data: bytes) -> None:
        kind = self._take((FAIL_BEFORE, LOST_RESPONSE, LANDED_EXISTS), relative)
        if kind == FAIL_BEFORE:
            self.writes.append((relative, kind))
            raise StorageError(f"injected failure before writing {relative}")
        try:
            self.inner.write_if_absent(relative, data)
        except FileExistsInStoreError:
            self.writes.append((relative, "exists"))
            raise
        self.writes.append((relative, kind or "written"))
        if kind == LOST_RESPONSE:
            raise StorageError(f"injected timeout after writing {relative}")
        if kind == LANDED_EXISTS:
            raise FileExistsInStoreError(f"{relative} already exists (injected client retry)")

    def write(self, relative: str, data: bytes) -> None:
        kind = self._take((FAIL_BEFORE,), relative)
        if kind:
            raise StorageError(f"injected failure before writing {relative}")
        self.inner.write(relative, data)

    def delete(self, relative: str) -> None:
        self.inner.delete(relative)


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[None]:
    """``path`` refuses new files for real, as a read-only ``_delta_log`` does: mode 0555 for an
    ordinary user; for root, whom modes do not stop, the ext4/xfs immutable attribute
    (``chattr +i``: creating a file fails with EPERM even for root). Skips the test where neither
    can be set (root on a file system without the attribute)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make {path} read-only for root here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
