"""Log I/O of the commit loop: write a commit file, find and read the commits that won.

Split from ``transaction`` so the retry loop reads as the algorithm it is. Every failure to read a
winner becomes a ``ConcurrentWriteException`` (nothing was written, the caller may retry) rather
than a silent commit over something unseen.

Put-if-absent alone cannot tell a free version from one that log cleanup deleted: a writer that
read an old snapshot could "win" version N in the hole below a newer checkpoint, be told it
committed, and lose its rows (readers start from the checkpoint). So before every write the log
is listed from N-1 (``probe_version``): N-1 must still be there and nothing at or after N; and
after the write ``confirm_in_history`` checks that N-1 survived (or that a checkpoint built
after the write covers N). Anything else is a ``TransactionTooOldError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from txntable.engine.commit.conflicts import WinningCommit
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentWriteException,
    CorruptLogError,
    StorageError,
    TransactionTooOldError,
    UnsafeCommitStorageError,
    VersionGapError,
)
from txntable.engine.model.actions import CommitInfo, parse_commit
from txntable.engine.read.segment import list_commits_after
from txntable.engine.read.snapshot import read_commits
from txntable.engine.storage.base import FileExistsInStoreError, FileInfo, Storage
from txntable.engine.storage.paths import (
    LOG_DIR,
    LogFileKind,
    commit_name,
    listing_prefix,
    parse_log_name,
)

_RELIST_ATTEMPTS = 5
SINGLE_WRITER_KEY = "txntable.singleWriter"


def check_commit_storage(storage: Storage, configuration: Mapping[str, str]) -> None:
    """Refuse a store without atomic put-if-absent unless the table declares a single writer."""
    if storage.atomic_put_if_absent:
        return
    if configuration.get(SINGLE_WRITER_KEY, "").strip().lower() == "true":
        return
    raise UnsafeCommitStorageError(
        f"{type(storage).__name__} at {storage.root_uri} cannot create a commit file "
        "atomically (no put-if-absent), so concurrent writers could overwrite each "
        "other's commits; refusing to commit. If this process is the table's only "
        f"writer, set the table property {SINGLE_WRITER_KEY}=true."
    )


def put_commit(storage: Storage, version: int, data: bytes, single_writer: bool) -> None:
    """Create ``{version}.json``; ``FileExistsInStoreError`` when the version is taken.

    ``single_writer``: the store has no put-if-absent and the table declared one writer, so a
    check-then-write is enough.
    """
    name = f"{LOG_DIR}/{commit_name(version)}"
    if not single_writer:
        storage.write_if_absent(name, data)
        return
    try:
        storage.read(name)
    except FileNotFoundError:
        storage.write(name, data)
        return
    raise FileExistsInStoreError(f"{name} already exists")


def _too_old(version: int, why: str) -> TransactionTooOldError:
    return TransactionTooOldError(
        f"cannot commit version {version}: {why}. Log cleanup removed versions this "
        "transaction builds on (it read an old snapshot); nothing was committed: read the table "
        "again and redo the operation",
        winning_version=version,
    )


def _around(storage: Storage, version: int) -> tuple[dict[int, FileInfo], dict[int, FileInfo]]:
    """Commits and (non-empty) checkpoint files from ``version - 1`` on, by version."""
    commits: dict[int, FileInfo] = {}
    checkpoints: dict[int, FileInfo] = {}
    for info in storage.list_log(listing_prefix(max(version - 1, 0))):
        parsed = parse_log_name(info.name)
        if parsed is None:
            continue
        if parsed.kind is LogFileKind.COMMIT:
            commits[parsed.version] = info
        elif parsed.is_checkpoint and info.size > 0:
            newest = checkpoints.get(parsed.version)
            if newest is None or info.mtime_ms > newest.mtime_ms:
                checkpoints[parsed.version] = info
    return commits, checkpoints


def probe_version(storage: Storage, version: int) -> bool:
    """Whether ``version`` is the next free version: True to write it, False when commits at or
    after it exist (a lost race: read the winners). ``TransactionTooOldError`` when the commit
    before it is gone, or a checkpoint stands at or after it with no commit: the version would
    land in a hole left by log cleanup."""
    commits, checkpoints = _around(storage, version)
    if version > 0 and version - 1 not in commits and version - 1 not in checkpoints:
        raise _too_old(version, f"commit {version - 1} is no longer in the log")
    if any(v >= version for v in commits):
        return False
    above = [v for v in checkpoints if v >= version]
    if above:
        raise _too_old(version, f"a checkpoint at version {max(above)} already covers it")
    return True


def confirm_in_history(storage: Storage, version: int, written_ms: int) -> bool:
    """After writing ``version`` (at about ``written_ms``): True when it is part of the table's
    history (the commit before it is still there, or a checkpoint at or after it was written
    after it and so includes it); False when it landed in a hole that cleanup opened while it
    was being written."""
    if version == 0:
        return True
    commits, checkpoints = _around(storage, version)
    if version - 1 in commits or version - 1 in checkpoints:
        return True
    ours = commits.get(version)
    since = ours.mtime_ms if ours is not None else written_ms
    # strictly newer: a checkpoint from the same millisecond may predate us, and acknowledging a
    # commit no reader sees loses data, while refusing one that landed only risks a retry
    return any(v >= version and c.mtime_ms > since for v, c in checkpoints.items())


def withdraw_commit(storage: Storage, version: int, txn_id: str) -> None:
    """Delete our own commit file that landed in a hole (no reader can reach it from a
    checkpoint, and cleanup would delete it anyway); never anyone else's."""
    if commit_carries_txn(storage, version, txn_id):
        storage.delete(f"{LOG_DIR}/{commit_name(version)}")


def retries_exceeded(
    attempts: int, start_version: int, version: int, num_actions: int, started: float
) -> CommitRetriesExceededError:
    """Spark's DELTA_MAX_COMMIT_RETRIES_EXCEEDED, with the same facts."""
    elapsed = time.monotonic() - started
    return CommitRetriesExceededError(
        f"gave up committing after {attempts} attempts: started at version {start_version}, "
        f"last tried version {version} ({num_actions} actions, {elapsed:.3f}s). "
        "Other writers kept winning; try again or raise max_attempts.",
        attempts=attempts,
        start_version=start_version,
        failed_at_version=version,
        num_actions=num_actions,
        elapsed_s=elapsed,
    )


def commit_carries_txn(storage: Storage, version: int, txn_id: str) -> bool | None:
    """After an ambiguous write error: True if ``{version}.json`` is ours (same ``txnId``),
    False if another writer's, None if the version is still free or cannot be read."""
    try:
        data = storage.read_log(commit_name(version))
    except (FileNotFoundError, StorageError):
        return None
    try:
        actions = parse_commit(data)
    except CorruptLogError:
        return False
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    return bool(info and info.txn_id == txn_id)


def read_winners(
    storage: Storage,
    first: int,
    sleep: Callable[[float], None],
    backoff: Callable[[int], float],
) -> list[WinningCommit]:
    """Commits from version ``first`` on, in order; re-lists briefly if the listing lags the
    failed write (eventually consistent stores). Empty if none ever shows up."""
    for relist in range(_RELIST_ATTEMPTS):
        try:
            commits, _ = list_commits_after(storage, first - 1)
        except VersionGapError as exc:
            raise _too_old(first, f"the commits that won it are gone ({exc})") from exc
        except CorruptLogError as exc:
            raise ConcurrentWriteException(
                f"cannot list the commits that won version {first}: {exc}; nothing was "
                "written, retry the operation",
                winning_version=first,
            ) from exc
        if commits:
            break
        sleep(backoff(relist + 1))
    else:
        return []
    try:
        parsed = read_commits(storage, commits)
    except CorruptLogError as exc:
        raise ConcurrentWriteException(
            f"cannot read a commit that won against this transaction ({exc}); nothing was "
            "written, retry the operation",
            winning_version=first,
        ) from exc
    mtimes = {c.version: c.file.mtime_ms for c in commits}
    return [WinningCommit(v, actions, mtimes[v]) for v, actions in parsed]
