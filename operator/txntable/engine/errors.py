"""Every error the engine raises, in one place, so callers can catch by meaning.

Hierarchy::

    EngineError
    ├── StorageError                 storage unreachable, permission denied, I/O failure
    │   └── WriteRefusedError        a write refused before anything was stored (permission
    │                                denied, read-only file system): certainly not written
    ├── TableNotFoundError           no Delta log at the location
    ├── CorruptLogError              the log cannot be replayed as the protocol requires
    │   ├── VersionGapError          commits after the checkpoint are not contiguous
    │   ├── TruncatedLogError        the first needed commit (or checkpoint) is gone
    │   ├── LogFileGoneError         a log file the listing named was deleted before it was
    │   │                            read (log cleanup ran meanwhile): list again
    │   └── InvalidActionError       a commit line or checkpoint row is not a valid action
    ├── VersionNotFoundError         time travel to a version/timestamp the log does not hold
    ├── IcebergMetadataError         UniForm's Iceberg metadata cannot be read, so VACUUM cannot
    │                                tell which files Iceberg readers still read
    ├── UnsupportedFeatureError      the protocol asks for a feature this engine cannot honour
    │   ├── UnsupportedReaderFeatureError
    │   └── UnsupportedWriterFeatureError
    ├── InvalidArgumentError         a caller passed a value the engine cannot accept
    │   ├── InvalidCommitError       the actions of a commit break a protocol rule (nothing written)
    │   └── RetentionTooShortError   a VACUUM retention below the table's, not forced
    ├── UnsafeCommitStorageError     the storage has no atomic put-if-absent and the table does not
    │                                declare a single writer (also a StorageError)
    ├── CommitRetriesExceededError   the retry loop ran out of attempts (Spark's
    │                                DELTA_MAX_COMMIT_RETRIES_EXCEEDED)
    └── ConcurrentModificationException   a concurrent commit conflicts (Delta's names, SQLSTATE
        │                                 2D521; attributes winning_version, winning_operation,
        │                                 partition, winning_commit_info)
        ├── ConcurrentWriteException          generic (e.g. the winning commit cannot be read)
        │   └── TransactionTooOldError        log cleanup removed the versions after this
        │                                     transaction's read version: re-read and redo
        ├── MetadataChangedException          the winner changed the table metadata
        ├── ProtocolChangedException          the winner changed the protocol (or both created
        │                                     the table)
        ├── ConcurrentAppendException         the winner added files this transaction should
        │                                     have read
        ├── ConcurrentDeleteReadException     the winner removed a file this transaction read
        ├── ConcurrentDeleteDeleteException   both removed the same file
        └── ConcurrentTransactionException    same app id (txn) or metadata domain written
"""

from __future__ import annotations

from collections.abc import Sequence


class EngineError(Exception):
    """Base of every error raised by ``txntable.engine``.

    ``uncommitted_files`` names the data files (table-relative paths) a failed write left in
    place, because its commit may have landed or deleting them failed; the message names them
    too. Empty when the failure left nothing behind.
    """

    uncommitted_files: tuple[str, ...] = ()

    def leave_files(self, paths: Sequence[str], why: str) -> None:
        """Record ``paths`` as left behind (``why``) and name them in the message."""
        self.uncommitted_files = (*self.uncommitted_files, *paths)
        shown = ", ".join(paths[:_NAMED_FILES])
        if len(paths) > _NAMED_FILES:
            shown += f" and {len(paths) - _NAMED_FILES} more"
        note = (
            f"{why}, so the {len(paths)} data file(s) written for it were kept: {shown}; if no "
            "version references them, VACUUM deletes them once they are older than the retention"
        )
        head = str(self.args[0]) if self.args else ""
        self.args = (f"{head}; {note}" if head else note, *self.args[1:])


#: files named in a message (``uncommitted_files`` holds all of them)
_NAMED_FILES = 20


class StorageError(EngineError):
    """The storage behind a table could not be reached or refused an operation."""


class WriteRefusedError(StorageError):
    """The storage refused a write before storing anything (permission denied, a read-only
    file system): unlike a timeout or a lost response, the file is certainly not there, so a
    commit that fails this way certainly did not land and retrying it cannot help."""


class TableNotFoundError(EngineError):
    """There is no Delta table (no ``_delta_log`` with commits) at the location."""


class CorruptLogError(EngineError):
    """The transaction log is inconsistent and cannot be replayed."""


class VersionGapError(CorruptLogError):
    """Commit files after the chosen checkpoint are not contiguous."""


class TruncatedLogError(CorruptLogError):
    """The log lacks the commit or checkpoint needed to start replay."""


class LogFileGoneError(CorruptLogError):
    """A commit or checkpoint file the listing named was gone when it was read: log cleanup
    deleted it in between. A fresh listing finds the newer checkpoint that replaced it."""


class InvalidActionError(CorruptLogError):
    """A line of a commit file or a row of a checkpoint is not a valid action."""


class VersionNotFoundError(EngineError):
    """Time travel asked for a version or timestamp outside the retained log."""


class IcebergMetadataError(EngineError):
    """The Iceberg metadata of a UniForm table cannot be read (a metadata file that is not
    JSON, a missing or undecodable manifest list or manifest, a file outside the table root):
    VACUUM, which keeps the files the current Iceberg snapshot reads, refuses rather than
    guess."""


class UnsupportedFeatureError(EngineError):
    """The table's protocol requires a feature this engine does not implement."""

    def __init__(self, message: str, features: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.features = features


class UnsupportedReaderFeatureError(UnsupportedFeatureError):
    """Reading the table needs a feature this engine cannot read."""


class UnsupportedWriterFeatureError(UnsupportedFeatureError):
    """Writing the table needs a feature this engine cannot write."""


class InvalidArgumentError(EngineError, ValueError):
    """A caller passed an argument the engine cannot accept."""


class RetentionTooShortError(InvalidArgumentError):
    """A VACUUM retention shorter than the table's ``delta.deletedFileRetentionDuration`` was
    asked for without forcing it (Spark's retention check); nothing was deleted. The message
    says why it is refused; how to force it is the caller's to say (a flag, a policy field),
    from ``retention_ms`` and ``table_retention_ms``."""

    def __init__(self, message: str, *, retention_ms: int, table_retention_ms: int) -> None:
        super().__init__(message)
        self.retention_ms = retention_ms
        self.table_retention_ms = table_retention_ms


class InvalidCommitError(InvalidArgumentError):
    """The actions of a commit break a rule of the protocol; nothing was written.

    ``code`` is Delta Spark's error class for the same rule
    (e.g. ``DELTA_DUPLICATE_ACTIONS_FOUND``).
    """

    def __init__(self, message: str, code: str = "DELTA_INVALID_COMMIT") -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


class UnsafeCommitStorageError(StorageError):
    """Committing needs an atomic put-if-absent that this storage does not offer."""


class CommitRetriesExceededError(EngineError):
    """Every allowed commit attempt found its version taken (no conflict, just contention)."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        start_version: int,
        failed_at_version: int,
        num_actions: int,
        elapsed_s: float,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.start_version = start_version
        self.failed_at_version = failed_at_version
        self.num_actions = num_actions
        self.elapsed_s = elapsed_s


class ConcurrentModificationException(EngineError):  # noqa: N818 - Delta's name
    """A commit that landed after this transaction's read version conflicts with it."""

    sqlstate = "2D521"

    def __init__(
        self,
        message: str,
        *,
        winning_version: int | None = None,
        winning_operation: str | None = None,
        partition: str | None = None,
        winning_commit_info: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.winning_version = winning_version
        self.winning_operation = winning_operation
        self.partition = partition
        self.winning_commit_info = winning_commit_info or {}


class ConcurrentWriteException(ConcurrentModificationException):
    """A generic concurrent-write conflict."""


class TransactionTooOldError(ConcurrentWriteException):
    """Log cleanup deleted commits this transaction would have to check or build on.

    Its version would land in a hole below a newer checkpoint, where no reader would ever see
    it, so nothing is acknowledged: the caller must read the table again and redo the work.
    """


class MetadataChangedException(ConcurrentModificationException):
    """The winning commit changed the table's metadata."""


class ProtocolChangedException(ConcurrentModificationException):
    """The winning commit changed the protocol, or created the table concurrently."""


class ConcurrentAppendException(ConcurrentModificationException):
    """The winning commit added files that this transaction should have read."""


class ConcurrentDeleteReadException(ConcurrentModificationException):
    """The winning commit removed a file that this transaction read."""


class ConcurrentDeleteDeleteException(ConcurrentModificationException):
    """The winning commit removed a file that this transaction also removes."""


class ConcurrentTransactionException(ConcurrentModificationException):
    """The winning commit wrote an app id (``txn``) or metadata domain this one depends on."""
