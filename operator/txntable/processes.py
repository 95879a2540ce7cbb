"""Find and stop the processes a txntable process started, by a marker in their environment.

Some of what txntable starts is not a direct child it could wait for: PySpark launches its
gateway JVM through ``spark-submit`` (a shell script, then a launcher JVM, then the driver JVM),
the JVM forks Python workers, and a local run is a supervisor, a job, and that job's JVM. When
the start is interrupted (Ctrl-C in the first seconds of Spark's start-up) or the parent gives
up on them, nothing else would stop those processes: the gateway JVM ignores SIGINT and only
watches its stdin once it is up, so it was left running, reparented to PID 1.

Every such process inherits its parent's environment, so a marker variable set before the
start (``name=value``) finds all of them, however they were re-parented or regrouped, on any
Linux ``/proc``; elsewhere nothing is found and nothing is killed. A process whose environment
cannot be read (another user's) is never ours. Standard library only: both the launchers and
the Spark executors use it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_PROC = Path("/proc")


def marked(name: str, value: str) -> list[int]:
    """Pids of the live processes (not this one) whose environment has ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    try:
        entries = list(_PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state[state.rfind(")") + 2 :].startswith("Z"):
            continue  # a zombie is already dead; its parent reaps it
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def stop_marked(name: str, value: str, grace_seconds: float = 5.0) -> list[int]:
    """Stop every process marked ``name=value``: SIGTERM, then SIGKILL to whatever is left
    after ``grace_seconds``. Returns the pids that were found."""
    pids = marked(name, value)
    for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
        alive = marked(name, value)
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, sig)
            except OSError:  # ended meanwhile
                continue
        deadline = time.monotonic() + wait
        while marked(name, value) and time.monotonic() < deadline:
            time.sleep(0.05)
    return pids


__all__ = ["marked", "stop_marked"]
