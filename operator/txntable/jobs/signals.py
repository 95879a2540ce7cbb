"""Ctrl-C and SIGTERM end a command the same way: as an exception, so it stops what it started.

Python turns SIGINT into ``KeyboardInterrupt`` but dies on SIGTERM without running a ``finally``
or an ``except``: a local run's job stopped with SIGTERM (the local launcher's delete, a
Kubernetes pod's termination) left the Spark JVM it had started, or was starting, behind. Inside
``raise_on_sigterm`` a SIGTERM raises ``Terminated``, a ``KeyboardInterrupt``, so every path
that cleans up after Ctrl-C cleans up after SIGTERM too; only the exit status differs
(``exit_status``: 130 and 143, the shell's 128 + signal number).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread by ``raise_on_sigterm``'s handler)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise Terminated()


@contextmanager
def raise_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` in the main thread (the handler before
    is restored after; in another thread nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (SIGINT), 143 for SIGTERM."""
    return EXIT_TERMINATED if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED


def describe(interrupt: KeyboardInterrupt) -> str:
    """``interrupted`` or ``terminated``, then what the command did about it when the
    exception says (``KeyboardInterrupt("stopped the run it had started: ...")``), for the
    one ``error:`` line."""
    what = "terminated" if isinstance(interrupt, Terminated) else "interrupted"
    said = str(interrupt)
    return f"{what}; {said}" if said else what


__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "describe",
    "exit_status",
    "raise_on_sigterm",
]
