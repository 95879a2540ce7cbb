"""Log I/O of the commit loop: write a commit file, find and read the commits that won.

Split from ``transaction`` so the retry loop reads as the algorithm it is. Every failure to read a
winner becomes a ``ConcurrentWriteException`` (nothing was written, the caller may retry) rather
than a silent commit over something unseen (brief 9, case 34).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from txntable.engine.actions import CommitInfo, parse_commit
from txntable.engine.conflicts import WinningCommit
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentWriteException,
    CorruptLogError,
    StorageError,
    UnsafeCommitStorageError,
)
from txntable.engine.paths import LOG_DIR, commit_name
from txntable.engine.segment import list_commits_after
from txntable.engine.snapshot import read_commits
from txntable.engine.storage import FileExistsInStoreError, Storage

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
