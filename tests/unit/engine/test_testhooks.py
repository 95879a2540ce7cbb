"""The pause points' resume mode: a paused writer goes on once the test removes the marker."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from txntable.engine import testhooks


def test_a_resumable_pause_waits_for_the_marker_to_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "paused"
    monkeypatch.setenv(testhooks.PAUSE_ENV, "here")
    monkeypatch.setenv(testhooks.MARKER_ENV, str(marker))
    monkeypatch.setenv(testhooks.RESUME_ENV, "1")
    passed = threading.Event()

    def writer() -> None:
        testhooks.pause_point("elsewhere")  # not the named point: returns at once
        testhooks.pause_point("here")
        passed.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.read_text() == "here"
    assert not passed.wait(0.3)  # held while the marker is there
    marker.unlink()
    thread.join(10)
    assert passed.is_set()
