"""A checkpoint or a cleanup killed (SIGKILL) at any step leaves a table every engine can read.

The writer runs as a real subprocess (the ``txntable`` CLI). ``TXNTABLE_TEST_PAUSE_AT`` makes it
stop at a named step (``engine/testhooks.py``) and write a marker; the test then kills it with
``SIGKILL``, checks that our reader and deltalake both still see exactly the table they saw before,
and that a later checkpoint (or cleanup) succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.checkpoint_interop import (
    _deltalake,
    _deltalake_table,
    _drop_commits_before,
    _ours,
)
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.retention import DAY_MS
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.read import last_checkpoint
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.engine.testhooks import MARKER_ENV, PAUSE_ENV

pytestmark = pytest.mark.integration


def _run_until(point: str, args: list[str], tmp_path: Path) -> None:
    """Run ``txntable ARGS`` until it pauses at ``point``, then SIGKILL it."""
    marker = tmp_path / f"marker-{point.replace(':', '_')}"
    env = {
        **os.environ,
        PAUSE_ENV: point,
        MARKER_ENV: str(marker),
        "PYTHONPATH": str(REPO / "operator"),
    }
    code = "import sys; from txntable.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"writer exited ({proc.returncode}) before {point}: {err!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"writer never reached {point}")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL


#: kill points at which the parts are written but none is in place yet
STAGED_ONLY = (
    "checkpoint:row-group-written",
    "checkpoint:part-written:1",
    "checkpoint:part-written:2",
)


def _readable_as_before(root: Path, before: dict[str, Any]) -> None:
    assert _ours(root) == before
    assert _deltalake(root) == before


@pytest.mark.parametrize(
    "point",
    [
        "checkpoint:before-parts",
        "checkpoint:row-group-written",  # a half-written part under its temporary name
        "checkpoint:part-written:1",  # parts written under temporary names, none in place
        "checkpoint:part-written:2",
        "checkpoint:part-placed:1",  # an incomplete set of parts: the one a kill can leave
        "checkpoint:before-hint",  # every part, no hint yet
        "checkpoint:after-hint",
    ],
)
def test_checkpoint_killed(point: str, tmp_path: Path) -> None:
    root = _deltalake_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 1))  # an older checkpoint and hint exist
    before = _deltalake(root)
    _run_until(point, ["checkpoint", str(root), "--part-size", "2"], tmp_path)
    leftovers = list((root / "_delta_log").glob(".*.tmp"))
    staged = point == "checkpoint:row-group-written" or point.startswith("checkpoint:part-")
    assert bool(leftovers) == staged, leftovers
    parts = list((root / "_delta_log").glob("*.checkpoint.0*.parquet"))
    assert bool(parts) == (point not in STAGED_ONLY and point != "checkpoint:before-parts")
    _readable_as_before(root, before)
    result = write_checkpoint(Snapshot.load(storage), part_size=2)
    # every part there: the checkpoint is complete and kept, the hint written if it was not
    assert result.parts is not None
    assert result.existing == (point in ("checkpoint:before-hint", "checkpoint:after-hint"))
    assert result.hint_written == (point != "checkpoint:after-hint")
    hint = last_checkpoint.read(storage)
    assert hint is not None and (hint.version, hint.parts) == (result.version, result.parts)
    _readable_as_before(root, before)
    _drop_commits_before(root, result.version)
    _readable_as_before(root, before)


@pytest.mark.parametrize(
    "point", ["cleanup:before-delete", "cleanup:deleted:1", "cleanup:deleted:3"]
)
def test_cleanup_killed(point: str, tmp_path: Path) -> None:
    root = _deltalake_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 1))
    checkpoint = write_checkpoint(Snapshot.load(storage, 3))  # four older files to delete
    old = (int(time.time() * 1000) - 40 * DAY_MS) * 1_000_000
    for f in (root / "_delta_log").iterdir():
        os.utime(f, ns=(old, old))
    before = _deltalake(root)
    _run_until(point, ["cleanup", str(root)], tmp_path)
    _readable_as_before(root, before)
    done = cleanup_expired_logs(Snapshot.load(storage))
    assert done.checkpoint_version == checkpoint.version
    assert not (root / "_delta_log" / f"{0:020d}.json").exists()
    _readable_as_before(root, before)
    later = write_checkpoint(Snapshot.load(storage))  # the same version: kept as it is
    assert later.existing and later.files == checkpoint.files and not later.hint_written
    hint = last_checkpoint.read(storage)
    assert hint is not None and hint.version == checkpoint.version
    _readable_as_before(root, before)


def _age_log(root: Path, days: float) -> None:
    old = (int(time.time() * 1000) - int(days * DAY_MS)) * 1_000_000
    for f in (root / "_delta_log").iterdir():
        if f.name[:1].isdigit():
            os.utime(f, ns=(old, old))


def _deltalake_cleanup(root: Path) -> str:
    """deltalake's own log cleanup (what its writers run after their checkpoints), in a child
    process; what it printed or the error it ended with."""
    code = "import sys, deltalake\nprint(deltalake.DeltaTable(sys.argv[1]).cleanup_metadata())\n"
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def test_parts_written_but_not_placed_give_deltalakes_cleanup_nothing_to_misread(
    tmp_path: Path,
) -> None:
    """Killed after writing every part and before placing one: no checkpoint file is visible,
    so deltalake's cleanup (which takes any checkpoint file for a checkpoint) keeps the
    complete checkpoint before it and the commits after that one."""
    root = _deltalake_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 1))
    before = _deltalake(root)
    _run_until("checkpoint:part-written:2", ["checkpoint", str(root), "--part-size", "2"], tmp_path)
    _age_log(root, 40)
    _deltalake_cleanup(root)
    _readable_as_before(root, before)
    assert Snapshot.load(storage, 2).version == 2  # versions after the checkpoint still load


def test_cleanup_removes_an_abandoned_incomplete_set(tmp_path: Path) -> None:
    """Killed between placing two parts: the incomplete set stays until it is an hour old,
    then our cleanup removes it, and deltalake's cleanup after that loses nothing."""
    root = _deltalake_table(tmp_path)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 1))
    before = _deltalake(root)
    _run_until("checkpoint:part-placed:1", ["checkpoint", str(root), "--part-size", "2"], tmp_path)
    parts = sorted(p.name for p in (root / "_delta_log").glob("*.checkpoint.0*.parquet"))
    assert len(parts) == 1, parts
    fresh = cleanup_expired_logs(Snapshot.load(storage), dry_run=True)
    assert not any(".checkpoint.0" in d for d in fresh.deleted)  # it may be in progress
    _age_log(root, 40)
    done = cleanup_expired_logs(Snapshot.load(storage))
    gone = [d.rsplit("/", 1)[-1] for d in done.deleted]
    assert [g for g in gone if g.startswith("0") and ".checkpoint.0" in g] == parts
    assert not list((root / "_delta_log").glob("*.checkpoint.0*.parquet"))
    _readable_as_before(root, before)
    _deltalake_cleanup(root)
    _readable_as_before(root, before)
