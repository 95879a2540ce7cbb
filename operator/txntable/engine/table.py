"""The public handle on one Delta table: open it, take snapshots, read its history.

``Table`` keeps its latest snapshot and refreshes it incrementally, so repeated calls to
``snapshot()`` (the controller's observation loop) cost one listing plus the new commits.

The write path (``write.api``, transactions, the Parquet writer, row deletes) is imported by
the methods that write, so a process that only reads (``txntable inspect``) skips it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from txntable.engine.errors import InvalidArgumentError, TableNotFoundError, VersionNotFoundError
from txntable.engine.model.actions import CommitInfo, parse_commit
from txntable.engine.read.segment import Commit, list_all_commits
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import Storage
from txntable.engine.storage.factory import open_storage

if TYPE_CHECKING:
    import pyarrow as pa

    from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
    from txntable.engine.model.predicates import Predicate
    from txntable.engine.write.writer import DataInput


class Table:
    """A Delta table at a location (local path, ``file://``, ``memory://``, or fsspec URL)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._latest: Snapshot | None = None

    @classmethod
    def open(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> Table:
        """Open an existing table; raises ``TableNotFoundError`` when there is none."""
        storage = open_storage(uri, storage_options)
        if not storage.has_log_files():
            raise TableNotFoundError(
                f"no Delta table at {storage.root_uri} (empty or missing _delta_log)"
            )
        return cls(storage)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Table:
        """A handle on ``snapshot``'s table whose next ``snapshot()`` refreshes that one (the
        new commits only) instead of loading the table again: for a caller that holds a
        snapshot and then commits, as VACUUM does. A snapshot loaded without statistics is
        not kept (nothing may be written from it): the handle then loads its own."""
        table = cls(snapshot.storage)
        if snapshot.has_stats:
            table._latest = snapshot
        return table

    @property
    def uri(self) -> str:
        return self.storage.root_uri

    def snapshot(
        self, version: int | None = None, timestamp: datetime | int | None = None
    ) -> Snapshot:
        """The table at ``version``, at the newest commit not after ``timestamp``, or latest."""
        if version is not None and timestamp is not None:
            raise InvalidArgumentError("give a version or a timestamp, not both")
        if version is not None and version < 0:
            raise InvalidArgumentError(f"version must be >= 0, got {version}")
        if timestamp is not None:
            version = self.version_at(timestamp)
        if version is not None:
            if self._latest is not None and self._latest.version == version:
                return self._latest
            return Snapshot.load(self.storage, version)
        self._latest = self._latest.refresh() if self._latest else Snapshot.load(self.storage)
        return self._latest

    def version(self) -> int:
        return self.snapshot().version

    def transaction(self, options: CommitOptions | None = None) -> Transaction:
        """A transaction reading the latest snapshot (or creating the table if it has no log)."""
        from txntable.engine.commit.transaction import Transaction

        return Transaction(self, None, options)

    # -- writing data (engine.write.api) ---------------------------------------------------
    @classmethod
    def create(
        cls,
        uri: str,
        schema: pa.Schema,
        partition_by: Sequence[str] = (),
        properties: Mapping[str, str] | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
        options: CommitOptions | None = None,
    ) -> Table:
        """Create a new, empty table (version 0); refuses when one already exists there."""
        from txntable.engine.write import api as write_api

        table = cls(open_storage(uri, storage_options))
        write_api.create(
            table,
            schema,
            partition_by,
            properties,
            name=name,
            description=description,
            options=options,
        )
        return table

    def append(self, data: DataInput, *, options: CommitOptions | None = None) -> CommitResult:
        """Append an Arrow table or record batches as new Parquet files (a blind append)."""
        from txntable.engine.write import api as write_api

        return write_api.append(self, data, options=options)

    def overwrite(
        self,
        data: DataInput,
        partition_predicate: str | Predicate | None = None,
        *,
        options: CommitOptions | None = None,
    ) -> CommitResult:
        """Replace all rows, or those of the partitions matching ``partition_predicate``."""
        from txntable.engine.write import api as write_api

        return write_api.overwrite(self, data, partition_predicate, options=options)

    def delete(
        self, predicate: str | Predicate | None, *, options: CommitOptions | None = None
    ) -> CommitResult | None:
        """Delete the matching rows (``None``: all): whole files for a partition predicate,
        deletion vectors for one on data columns (tables with ``delta.enableDeletionVectors``);
        ``None`` if nothing matched."""
        from txntable.engine.write import api as write_api

        return write_api.delete(self, predicate, options=options)

    # -- history -------------------------------------------------------------------------
    def _commit_timestamps(self) -> list[tuple[int, int]]:
        """(version, timestamp ms) of retained commits, with modification times made strictly
        increasing the way Delta does when mapping timestamps to versions."""
        out: list[tuple[int, int]] = []
        previous = -1
        for commit in list_all_commits(self.storage):
            ts = commit.file.mtime_ms
            if ts <= previous:
                ts = previous + 1
            out.append((commit.version, ts))
            previous = ts
        ict = self._ict_timestamps([v for v, _ in out])
        return [(v, ict.get(v, ts)) for v, ts in out]

    def _ict_timestamps(self, versions: list[int]) -> dict[int, int]:
        if not versions:
            return {}
        latest = self.snapshot()
        config = latest.configuration
        if config.get("delta.enableInCommitTimestamps", "").lower() != "true":
            return {}
        start = int(config.get("delta.inCommitTimestampEnablementVersion", "0") or 0)
        out: dict[int, int] = {}
        for v in versions:
            if v >= start:
                info = self._commit_info(v)
                if info and info.in_commit_timestamp is not None:
                    out[v] = info.in_commit_timestamp
        return out

    def _commit_info(self, version: int) -> CommitInfo | None:
        try:
            data = self.storage.read_log(f"{version:020d}.json")
        except FileNotFoundError:
            return None
        return next((a for a in parse_commit(data) if isinstance(a, CommitInfo)), None)

    def version_at(self, timestamp: datetime | int) -> int:
        """The newest version committed at or before ``timestamp`` (datetime or epoch ms)."""
        if isinstance(timestamp, datetime):
            if timestamp.tzinfo is None:
                raise InvalidArgumentError("timestamp must be timezone-aware")
            ms = int(timestamp.timestamp() * 1000)
        else:
            ms = int(timestamp)
        commits = self._commit_timestamps()
        if not commits:
            raise TableNotFoundError(f"no commits in {self.uri}")
        candidates = [v for v, ts in commits if ts <= ms]
        if not candidates:
            raise VersionNotFoundError(
                f"timestamp {ms} is before the earliest retained commit "
                f"(version {commits[0][0]} at {commits[0][1]})"
            )
        return candidates[-1]

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """``commitInfo`` of retained commits, newest first, with ``version`` and ``timestamp``."""
        commits: list[Commit] = list_all_commits(self.storage)
        commits.reverse()
        if limit is not None:
            commits = commits[:limit]
        out: list[dict[str, Any]] = []
        for commit in commits:
            info = self._commit_info(commit.version)
            entry: dict[str, Any] = dict(info.data) if info else {}
            entry.setdefault("timestamp", commit.file.mtime_ms)
            entry["version"] = commit.version
            out.append(entry)
        return out

    def __repr__(self) -> str:
        return f"Table({json.dumps(self.uri)})"
