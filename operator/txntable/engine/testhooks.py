"""Named pause points for crash tests of checkpointing and log cleanup.

A crash test must kill the writer (a real ``SIGKILL``) at an exact step, for example after the
first checkpoint part and before ``_last_checkpoint``. The writer calls ``pause_point(name)`` at
those steps; it does nothing unless the environment variable ``TXNTABLE_TEST_PAUSE_AT`` names that
point, in which case the process writes the marker file named by ``TXNTABLE_TEST_PAUSE_MARKER``
and sleeps until it is killed. Production never sets these variables.

With ``TXNTABLE_TEST_PAUSE_RESUME=1`` the writer goes on once the test removes the marker
instead: a test lands another writer's commit at that exact step (a conflict test), then lets
the paused writer find it.
"""

from __future__ import annotations

import os
import time

PAUSE_ENV = "TXNTABLE_TEST_PAUSE_AT"
MARKER_ENV = "TXNTABLE_TEST_PAUSE_MARKER"
RESUME_ENV = "TXNTABLE_TEST_PAUSE_RESUME"


def pause_point(name: str) -> None:
    """Block at ``name`` when a test asked for it (forever, or until the marker is removed
    when resuming is asked for); otherwise return at once."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        _announce(marker, name)
        if os.environ.get(RESUME_ENV) == "1":
            while os.path.exists(marker):
                time.sleep(0.05)
            return
    while True:  # pragma: no cover - only ever left by SIGKILL
        time.sleep(3600)


def _announce(marker: str, name: str) -> None:
    """Write the marker whole under a temporary name, then rename it: a test that polls for the
    marker must never see it exist before it says which point was reached."""
    staging = f"{marker}.{os.getpid()}.tmp"
    with open(staging, "w", encoding="utf-8") as fh:
        fh.write(name)
    os.replace(staging, marker)
