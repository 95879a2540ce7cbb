"""Transactions: record what was read, validate what is written, commit with optimistic retries.

This is the one place where the engine writes to a table's log (PROTOCOL.md "Creation of New Log
Entries"). A ``Transaction`` reads through a snapshot and records its read set (partition
predicates, files, the whole table, app ids); ``commit`` validates the actions (``validate``), picks
the isolation level (``isolation``), builds ``commitInfo`` and tries to create ``{version}.json``
with the storage's put-if-absent. When the version is taken, the commits that won are checked one by
one with ``conflicts`` and the write is retried at the next free version, with backoff, until it
lands or a conflict or the attempt budget ends it. Spark's structure is followed (optimistic first
write, conflicts checked only after a lost race, the level fixed before the loop), plus
lost-response detection through ``txnId``.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from txntable.engine import observer as obs
from txntable.engine.commit.conflicts import PendingCommit, check_conflicts
from txntable.engine.commit.info import CommitInfoBuilder
from txntable.engine.commit.io import (
    check_commit_storage,
    commit_carries_txn,
    confirm_in_history,
    probe_version,
    put_commit,
    read_winners,
    retries_exceeded,
    withdraw_commit,
)
from txntable.engine.commit.isolation import (
    IsolationLevel,
    level_to_use,
    operation_changes_data,
    table_isolation_level,
)
from txntable.engine.commit.options import CommitOptions, CommitResult, PostCommitHook
from txntable.engine.commit.row_tracking import RowTrackingAssigner
from txntable.engine.commit.validate import PreparedCommit, is_true, prepare_commit
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentModificationException,
    InvalidArgumentError,
    StorageError,
    TableNotFoundError,
    TransactionTooOldError,
    WriteRefusedError,
)
from txntable.engine.model.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    RemoveFile,
    serialize_commit,
)
from txntable.engine.model.predicates import TRUE, BoundPredicate, Predicate, bind
from txntable.engine.observer import CommitEvent
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.state import ADD_SCHEMA
from txntable.engine.storage.base import FileExistsInStoreError, Storage

if TYPE_CHECKING:
    from txntable.engine.read.handle import TableHandle

log = logging.getLogger(__name__)

_MAX_AMBIGUOUS_WRITE_ERRORS = 3
ICT_KEY = "delta.enableInCommitTimestamps"


class Transaction:
    """One optimistic transaction on ``table``, reading at ``snapshot`` (latest by default).

    Without a snapshot and without a log at the location, it creates the table: its first
    commit (version 0) must carry ``metaData`` and gets protocol (1,2) unless one is given.
    """

    def __init__(
        self,
        table: TableHandle,
        snapshot: Snapshot | None = None,
        options: CommitOptions | None = None,
    ) -> None:
        self.table = table
        self.options = options or CommitOptions()
        if self.options.max_attempts < 1:
            raise InvalidArgumentError("max_attempts must be at least 1")
        if snapshot is None:
            try:
                snapshot = table.snapshot()
            except TableNotFoundError:
                snapshot = None
        self.snapshot = snapshot
        self.read_version = snapshot.version if snapshot else -1
        self.txn_id = str(uuid.uuid4())
        self._actions: list[Action] = []
        self._read_predicates: list[BoundPredicate] = []
        self._read_files: set[str] = set()
        self._read_whole_table = False
        self._read_app_ids: set[str] = set()
        self._committed = False
        self._attempts = 0
        #: a commit write whose outcome is unknown (an error that may have followed a landed
        #: write); False while every write is known not to have landed
        self._uncertain = False

    @property
    def may_have_landed(self) -> bool:
        """After ``commit`` raised: whether the commit may still be in the log. False when every
        attempt certainly failed (refused before writing, lost the version to another writer,
        or was withdrawn): the data files it would have added can then be deleted at once;
        True after an ambiguous write error, when only VACUUM may delete them later."""
        return self._uncertain

    # -- reading ---------------------------------------------------------------------------
    def scan(
        self, predicate: str | Predicate | None = None, *, track_files: bool = True
    ) -> pa.Table:
        """Live files (``ADD_SCHEMA`` rows) whose partition values match ``predicate``.

        Records the partition part of the predicate (``TRUE`` if it has none) and, unless
        ``track_files`` is False, the files returned: that is what decides the conflicts this
        transaction can have. OPTIMIZE scans without tracking and then ``track_read_files``
        only the files it compacts, as Spark does.
        """
        if self.snapshot is None:
            self._read_predicates.append(BoundPredicate(TRUE, (), {}))
            return ADD_SCHEMA.empty_table()
        bound = bind(predicate, self.snapshot.fields, self.snapshot.partition_columns)
        files = self.snapshot.files()
        if bound.partition != TRUE and files.num_rows:
            files = files.filter(bound.matches(self.snapshot.partition_values()))
        self._read_predicates.append(bound)
        if track_files:
            self.track_read_files(files)
        return files

    def track_read_files(self, files: pa.Table | Iterable[str]) -> None:
        """Record files (``ADD_SCHEMA`` rows or raw paths) as read: a concurrent remove of any
        of them is a ``ConcurrentDeleteReadException``."""
        if isinstance(files, pa.Table):
            self._read_files.update(files.column("path").to_pylist())
        else:
            self._read_files.update(files)

    def read_whole_table(self) -> None:
        """Declare that the result depends on the entire table (never a blind append)."""
        self._read_whole_table = True
        self._read_predicates.append(BoundPredicate(TRUE, (), {}))

    def txn_version(self, app_id: str) -> int | None:
        """The latest ``txn`` version of ``app_id`` at the read version (recorded as read)."""
        self._read_app_ids.add(app_id)
        return self.snapshot.txn_version(app_id) if self.snapshot else None

    @property
    def metadata(self) -> Metadata | None:
        """The metadata this transaction writes with (its own change, else the snapshot's)."""
        own = next((a for a in self._actions if isinstance(a, Metadata)), None)
        return own or (self.snapshot.metadata if self.snapshot else None)

    # -- writing ---------------------------------------------------------------------------
    def add(self, *actions: Action) -> None:
        """Stage actions (files, txn, domain metadata, metadata, protocol) for the commit."""
        self._check_open()
        for action in actions:
            if isinstance(action, CommitInfo):
                raise InvalidArgumentError(
                    "commitInfo is written by the transaction; pass extra members through "
                    "CommitOptions.commit_info"
                )
            self._actions.append(action)

    def set_metadata(self, metadata: Metadata) -> None:
        self.add(metadata)

    def set_protocol(self, protocol: Protocol) -> None:
        self.add(protocol)

    def _check_open(self) -> None:
        if self._committed:
            raise InvalidArgumentError("this transaction was already committed")

    # -- committing ------------------------------------------------------------------------
    def commit(
        self,
        operation: str,
        parameters: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        *,
        changes_data: bool | None = None,
    ) -> CommitResult:
        """Validate and commit the staged actions; returns the version that landed."""
        self._check_open()
        self._committed = True
        started = time.monotonic()
        opts = self.options
        event = CommitEvent(opts.table_name or "unnamed", operation, "none")
        try:
            prepared = self._prepare()
            table_level = table_isolation_level(prepared.metadata.configuration)
            if changes_data is None:
                changes_data = operation_changes_data(operation)
            level = level_to_use(prepared.actions, table_level, changes_data)
            pending = self._pending(prepared, level)
            info = self._commit_info(prepared, pending, operation, parameters, metrics)
            rows = RowTrackingAssigner.for_commit(prepared, self.snapshot)
        except Exception:
            self._finished(event, obs.INVALID, 0, started)
            raise
        event = CommitEvent(event.table, operation, level.value)
        if level is not table_level:
            obs.notify(opts.observer, lambda o: o.on_isolation_downgrade(event, table_level.value))
        try:
            version = self._commit_loop(prepared, pending, info, event, rows)
        except ConcurrentModificationException as exc:
            kind = type(exc).__name__
            obs.notify(opts.observer, lambda o: o.on_conflict(event, kind))
            self._finished(event, obs.CONFLICT, self._attempts, started)
            raise
        except CommitRetriesExceededError:
            self._finished(event, obs.RETRIES_EXCEEDED, self._attempts, started)
            raise
        except Exception:
            self._finished(event, obs.ERROR, self._attempts, started)
            raise
        result = CommitResult(version, self._attempts, level.value, self.txn_id, operation)
        self._finished(event, obs.COMMITTED, self._attempts, started)
        for hook in opts.post_commit_hooks:
            try:
                hook(self.table, result)
            except Exception:
                log.exception(
                    "post-commit hook %r failed after version %d; the commit stands",
                    getattr(hook, "__name__", hook),
                    version,
                )
        return result

    def _pending(self, prepared: PreparedCommit, level: IsolationLevel) -> PendingCommit:
        snap = self.snapshot
        return PendingCommit(
            actions=prepared.actions,
            isolation_level=level,
            read_predicates=tuple(self._read_predicates),
            read_files=frozenset(self._read_files),
            read_whole_table=self._read_whole_table,
            read_app_ids=frozenset(self._read_app_ids),
            read_protocol=snap.protocol if snap else None,
            read_metadata=snap.metadata if snap else None,
            is_blind_append=self._is_blind_append(prepared.actions),
            table_name=self.options.table_name or self.table.uri,
        )

    def _commit_info(
        self,
        prepared: PreparedCommit,
        pending: PendingCommit,
        operation: str,
        parameters: Mapping[str, Any] | None,
        metrics: Mapping[str, Any] | None,
    ) -> CommitInfoBuilder:
        opts = self.options
        ict = is_true(prepared.metadata.configuration.get(ICT_KEY))
        info = CommitInfoBuilder(
            operation=operation,
            parameters=dict(parameters or {}),
            metrics=dict(metrics or {}),
            read_version=self.read_version,
            isolation_level=pending.isolation_level.value,
            is_blind_append=pending.is_blind_append,
            txn_id=self.txn_id,
            run_id=opts.run_id,
            extra=dict(opts.commit_info),
            ict_enabled=ict,
            ict_enabling=ict
            and self.snapshot is not None
            and not is_true(self.snapshot.configuration.get(ICT_KEY)),
            now_ms=opts.clock_ms(),
            previous_timestamp_ms=self.snapshot.timestamp_ms if self.snapshot else None,
        )
        try:
            serialize_commit([info.build(1)])
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"commitInfo is not valid JSON: {exc}") from exc
        return info

    def _finished(self, event: CommitEvent, outcome: str, attempts: int, started: float) -> None:
        elapsed = time.monotonic() - started
        obs.notify(
            self.options.observer, lambda o: o.on_finished(event, outcome, attempts, elapsed)
        )

    def _prepare(self) -> PreparedCommit:
        snap = self.snapshot
        prepared = prepare_commit(
            self._actions,
            snap.protocol if snap else None,
            snap.metadata if snap else None,
            snap.files(stats=False) if snap else None,  # keys only
        )
        check_commit_storage(self.table.storage, prepared.metadata.configuration)
        return prepared

    def _is_blind_append(self, actions: Sequence[Action]) -> bool:
        only_adds = all(
            isinstance(a, AddFile)
            for a in actions
            if isinstance(a, AddFile | RemoveFile | AddCDCFile)
        )
        depends = bool(self._read_predicates or self._read_files or self._read_whole_table)
        return only_adds and not depends

    # -- the retry loop ----------------------------------------------------------------------
    def _commit_loop(
        self,
        prepared: PreparedCommit,
        pending: PendingCommit,
        info: CommitInfoBuilder,
        event: CommitEvent,
        rows: RowTrackingAssigner,
    ) -> int:
        """Write until the commit lands; returns its version (``self._attempts`` = attempts).

        Every attempt lists the log from the version before the one it writes (``probe_version``)
        and checks after writing that the commit is part of the history (``confirm_in_history``),
        so a version that log cleanup emptied is never acknowledged. Row ids and commit versions
        (row tracking) depend on the version and on the winners' high-water mark: per attempt."""
        opts = self.options
        storage = self.table.storage
        single_writer = not storage.atomic_put_if_absent
        start_version = attempt_version = self.read_version + 1
        started = time.monotonic()
        check = False
        ambiguous_errors = 0
        written_ms = 0
        while True:
            attempt = self._attempts
            if attempt >= opts.max_attempts:
                if check and self._landed_after_all(storage, attempt_version):
                    return self._confirmed(attempt_version, written_ms)
                raise retries_exceeded(
                    attempt, start_version, attempt_version, len(prepared.actions), started
                )
            if check:
                attempt_version, ours = self._catch_up(
                    storage, attempt_version, attempt, pending, event, info=info, rows=rows
                )
                if ours:
                    return attempt_version  # our earlier attempt landed after all
                check = False
            self._attempts = attempt = attempt + 1
            self._notify_attempt(event, attempt)
            if not probe_version(storage, attempt_version):
                check = True  # lost the race before writing: the winners are already listed
                continue
            actions = rows.actions_at(attempt_version)
            data = serialize_commit(info.commit_actions(attempt_version, attempt, actions))
            written_ms = int(time.time() * 1000)
            was_uncertain, self._uncertain = self._uncertain, True
            try:
                put_commit(storage, attempt_version, data, single_writer)
                return self._confirmed(attempt_version, written_ms)
            except FileExistsInStoreError:
                # uncertain until the winner is read: the answer of a client's retry of a
                # write that landed is "already exists" too
                check = True
            except WriteRefusedError:
                self._uncertain = was_uncertain  # nothing stored; asking again cannot help
                raise
            except StorageError:
                # The write may have landed although we saw an error (lost response).
                landed = commit_carries_txn(storage, attempt_version, self.txn_id)
                if landed is True:
                    return self._confirmed(attempt_version, written_ms)
                if landed is False:
                    self._uncertain = was_uncertain
                    check = True
                    continue
                ambiguous_errors += 1
                if ambiguous_errors >= _MAX_AMBIGUOUS_WRITE_ERRORS:
                    raise
                log.warning("commit write of version %d failed; retrying", attempt_version)
                opts.sleep(self._backoff(attempt))

    def _landed_after_all(self, storage: Storage, version: int) -> bool:
        """With the attempt budget spent and ``version`` taken: whether our own write took it,
        when that is uncertain. "Already exists" also answers a client's retry of our own landed
        write: look before giving up, so a landed commit is neither reported as failed nor has
        its data files deleted."""
        if not self._uncertain:
            return False
        landed = commit_carries_txn(storage, version, self.txn_id)
        if landed is True:
            return True
        self._uncertain = landed is None
        return False

    def _catch_up(
        self,
        storage: Storage,
        version: int,
        attempt: int,
        pending: PendingCommit,
        event: CommitEvent,
        *,
        info: CommitInfoBuilder,
        rows: RowTrackingAssigner,
    ) -> tuple[int, bool]:
        """After losing ``version``: back off, read the commits that won it and the versions
        after, and check each for conflicts with ``pending`` (``info`` and ``rows`` learn from
        each). Returns the version to write next, and False; or, when the first winner is our own
        earlier attempt (landed after all), its version and True."""
        opts = self.options
        # Back off first, then list: the version written next is the one just listed.
        opts.sleep(self._backoff(attempt))
        winners = read_winners(storage, version, opts.sleep, self._backoff)
        for index, winner in enumerate(winners):
            if index == 0 and winner.commit_info and winner.commit_info.txn_id == self.txn_id:
                return winner.version, True
            if index == 0 and winner.version == version:
                self._uncertain = False  # another writer holds the version we wrote
            check_conflicts(pending, winner)
            info.observe_winner(winner)
            rows.observe_winner(winner)
        if winners:
            version = winners[-1].version + 1
        self._notify_retry(event, attempt, len(winners))
        return version, False

    def _confirmed(self, version: int, written_ms: int) -> int:
        """``version`` once the log shows it is part of the history; otherwise our file sits in
        a hole that cleanup opened during the write: withdraw it and refuse."""
        storage = self.table.storage
        if confirm_in_history(storage, version, written_ms):
            return version
        withdraw_commit(storage, version, self.txn_id)
        self._uncertain = False  # withdrawn: no reader will ever see it
        raise TransactionTooOldError(
            f"commit {version} landed below a newer checkpoint while log cleanup removed the "
            "versions before it, so no reader would see it; it was withdrawn and nothing was "
            "committed: read the table again and redo the operation",
            winning_version=version,
        )

    def _notify_attempt(self, event: CommitEvent, attempt: int) -> None:
        obs.notify(self.options.observer, lambda o: o.on_attempt(event, attempt))

    def _notify_retry(self, event: CommitEvent, attempt: int, winners: int) -> None:
        obs.notify(self.options.observer, lambda o: o.on_retry(event, attempt, winners))

    def _backoff(self, attempt: int) -> float:
        opts = self.options
        cap = min(opts.backoff_max_s, opts.backoff_initial_s * (2 ** max(0, attempt - 1)))
        return random.uniform(cap / 2, cap) if cap > 0 else 0.0


__all__ = ["CommitOptions", "CommitResult", "IsolationLevel", "PostCommitHook", "Transaction"]
