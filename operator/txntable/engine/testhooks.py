"""Named pause points for crash tests of checkpointing and log cleanup.

A crash test must kill the writer (a real ``SIGKILL``) at an exact step, for example after the
first checkpoint part and before ``_last_checkpoint``. The writer calls ``pause_point(name)`` at
those steps; it does nothing unless the environment variable ``TXNTABLE_TEST_PAUSE_AT`` names that
point, in which case the process writes the marker file named by ``TXNTABLE_TEST_PAUSE_MARKER``
and sleeps until it is killed. Production never sets these variables.
"""

from __future__ import annotations

import os
import time

PAUSE_ENV = "TXNTABLE_TEST_PAUSE_AT"
MARKER_ENV = "TXNTABLE_TEST_PAUSE_MARKER"


def pause_point(name: str) -> None:
    """Block forever at ``name`` when a crash test asked for it; otherwise return at once."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        with open(marker, "w", encoding="utf-8") as fh:
            fh.write(name)
    while True:  # pragma: no cover - only ever left by SIGKILL
        time.sleep(3600)
