"""Ctrl-C and SIGTERM end a command the same way: as an exception, so it stops what it started.

Python turns SIGINT into ``KeyboardInterrupt`` but dies on SIGTERM without running a ``finally``
or an ``except``: a local run's job stopped with SIGTERM (the local launcher's delete, a
Kubernetes pod's termination) left the Spark JVM it had started, or was starting, behind. Inside
``raise_on_signals`` a SIGTERM raises ``Terminated``, a ``KeyboardInterrupt``, so every path
that cleans up after Ctrl-C cleans up after SIGTERM too; only the exit status differs
(``exit_status``: 130 and 143, the shell's 128 + signal number). Both are recorded as they
arrive (``txntable.interrupts``), so an interrupt that a library turned into another error
still stops the Spark session the abrupt way and still ends the command as an interrupt.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from txntable import interrupts

EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread by ``raise_on_signals``'s handler)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    interrupt = Terminated()
    interrupts.note(interrupt)
    raise interrupt


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    interrupt = KeyboardInterrupt()
    interrupts.note(interrupt)
    raise interrupt


@contextmanager
def raise_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` and SIGINT ``KeyboardInterrupt`` in
    the main thread, each recorded (``interrupts.noted``). A block that fails after an
    interrupt arrived ends with that interrupt (the failure as its cause), even when a library
    swallowed it whole; one that ends normally (its work done all the same) ends normally. A
    SIGINT that is ignored (a shell's background job) stays ignored; the handlers before are
    restored after, and the record forgotten. In another thread nothing changes."""
    inside = signal.getsignal(signal.SIGTERM) is _raise_terminated  # nested: the outer one rules
    if inside or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_term = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        yield
    except Exception as exc:  # a failure after an interrupt that a library swallowed whole
        noted = interrupts.noted()
        if noted is not None and interrupts.interrupt_in(exc) is None:
            raise noted from exc
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        interrupts.forget()


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
    "raise_on_signals",
]
