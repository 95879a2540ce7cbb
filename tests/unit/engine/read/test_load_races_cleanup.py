"""A load that loses a race with log cleanup lists again (issue 33.6).

With the log retention shortened and cleanup looping beside OPTIMIZE, an OPTIMIZE run failed
with "the log ... is missing commit version 3945 (found 3946 next)": it listed the log, then
cleanup deleted what it had chosen to read. Nothing was harmed, but the run was lost. A load now
lists again and starts from the newer checkpoint cleanup keeps, a bounded number of times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import deltagen as g
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.retention import DAY_MS
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import VersionGapError
from txntable.engine.read.snapshot import RELISTS_AFTER_CLEANUP, Snapshot
from txntable.engine.storage.base import FileInfo, LocalStorage
from txntable.engine.storage.paths import LOG_DIR
from txntable.engine.testhooks import MARKER_ENV, PAUSE_ENV, RESUME_ENV


def _checkpoint_and_clean_up(root: Path, version: int) -> None:
    """What a cleanup loop does: a checkpoint at ``version``, then every file below it goes
    (retention zero, the clock two days on: the cutoff is past every commit)."""
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, version))
    now = int(time.time() * 1000) + 2 * DAY_MS
    done = cleanup_expired_logs(Snapshot.load(storage), now_ms=now, retention_ms=0)
    assert done.checkpoint_version == version and done.deleted


def test_commits_deleted_between_the_listing_and_their_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = g.simple_log(tmp_path / "t", 8)
    expected = g.fingerprint(g.load(root))
    marker = tmp_path / "paused"
    monkeypatch.setenv(PAUSE_ENV, "snapshot:listed")
    monkeypatch.setenv(MARKER_ENV, str(marker))
    monkeypatch.setenv(RESUME_ENV, "1")
    outcome: dict[str, object] = {}

    def load() -> None:
        try:
            outcome["snapshot"] = Snapshot.load(LocalStorage(str(root)))
        except Exception as exc:
            outcome["error"] = exc

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert reader.is_alive() and time.monotonic() < deadline, outcome
        time.sleep(0.01)
    monkeypatch.delenv(PAUSE_ENV)  # the reader holds its listing of commits 0-7; nobody else stops
    _checkpoint_and_clean_up(root, 6)
    assert not (g.log(root) / f"{0:020d}.json").exists()
    marker.unlink()
    reader.join(30)

    assert "error" not in outcome, outcome["error"]
    snapshot = outcome["snapshot"]
    assert isinstance(snapshot, Snapshot)
    assert g.fingerprint(snapshot) == expected and snapshot.checkpoint_version == 6


class _ListingDuringCleanup(LocalStorage):
    """A directory listing is no snapshot of the directory: ``os.scandir`` reads the entries in
    hash order, in batches, while the loop stats them. This store's first listing of the log
    meets ``during`` (a checkpoint and log cleanup) halfway: the entries before ``pivot`` were
    read before it ran, those from ``pivot`` on after it (deleted ones are missing), and a file
    it created is behind the listing's position. Later listings are plain."""

    def __init__(self, root: str, during: Callable[[], None], pivot: str) -> None:
        super().__init__(root)
        self.during: Callable[[], None] | None = during
        self.pivot = pivot
        self.listings = 0

    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        if relative_dir == LOG_DIR:
            self.listings += 1
        if relative_dir != LOG_DIR or self.during is None:
            return super().list_dir(relative_dir, start_at)
        during, self.during = self.during, None
        first = super().list_dir(relative_dir, start_at)
        during()
        still = {f.name for f in super().list_dir(relative_dir, start_at)}
        return [f for f in first if f.name < self.pivot or f.name in still]


def test_a_listing_taken_while_cleanup_deleted_shows_a_gap(tmp_path: Path) -> None:
    """The issue's failure: the listing kept the old checkpoint (3) and commits 3-4, lost
    commit 5 to cleanup and never saw the new checkpoint (7)."""
    root = g.simple_log(tmp_path / "t", 10)
    write_checkpoint(g.load(root, 3))
    expected = g.fingerprint(g.load(root))
    storage = _ListingDuringCleanup(
        str(root), lambda: _checkpoint_and_clean_up(root, 7), pivot=f"{5:020d}.json"
    )

    snapshot = Snapshot.load(storage)

    assert g.fingerprint(snapshot) == expected and snapshot.checkpoint_version == 7
    assert storage.listings == 2


def test_a_real_gap_fails_after_a_bounded_number_of_listings(tmp_path: Path) -> None:
    root = g.simple_log(tmp_path / "t", 7)
    (g.log(root) / f"{3:020d}.json").unlink()
    storage = _ListingDuringCleanup(str(root), lambda: None, pivot="")

    with pytest.raises(VersionGapError, match="missing commit version 3 \\(found 4 next\\)"):
        Snapshot.load(storage)

    assert storage.listings == 1 + RELISTS_AFTER_CLEANUP
