"""Every error the engine raises, in one place, so callers can catch by meaning.

Hierarchy::

    EngineError
    ├── StorageError                 storage unreachable, permission denied, I/O failure
    ├── TableNotFoundError           no Delta log at the location
    ├── CorruptLogError              the log cannot be replayed as the protocol requires
    │   ├── VersionGapError          commits after the checkpoint are not contiguous
    │   ├── TruncatedLogError        the first needed commit (or checkpoint) is gone
    │   └── InvalidActionError       a commit line or checkpoint row is not a valid action
    ├── VersionNotFoundError         time travel to a version/timestamp the log does not hold
    ├── UnsupportedFeatureError      the protocol asks for a feature this engine cannot honour
    │   ├── UnsupportedReaderFeatureError
    │   └── UnsupportedWriterFeatureError
    └── InvalidArgumentError         a caller passed a value the engine cannot accept

The commit path adds its own conflict errors (Delta's names) to this module when it lands.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error raised by ``txntable.engine``."""


class StorageError(EngineError):
    """The storage behind a table could not be reached or refused an operation."""


class TableNotFoundError(EngineError):
    """There is no Delta table (no ``_delta_log`` with commits) at the location."""


class CorruptLogError(EngineError):
    """The transaction log is inconsistent and cannot be replayed."""


class VersionGapError(CorruptLogError):
    """Commit files after the chosen checkpoint are not contiguous."""


class TruncatedLogError(CorruptLogError):
    """The log lacks the commit or checkpoint needed to start replay."""


class InvalidActionError(CorruptLogError):
    """A line of a commit file or a row of a checkpoint is not a valid action."""


class VersionNotFoundError(EngineError):
    """Time travel asked for a version or timestamp outside the retained log."""


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
