"""An interrupt (Ctrl-C, SIGTERM) that a library turned into another exception is still one.

py4j handles a ``KeyboardInterrupt`` raised inside a call to the JVM by shutting the call's
socket down; PySpark's next call on the way out (``SCCallSiteSync.__exit__`` resetting the call
site after ``collect``) then fails with an error of its own (``Py4JNetworkError: Answer from
Java side is empty``), which replaces the interrupt. Our code that maps a failed
Spark job to a run's error then reported an ordinary failure, and the ``finally`` that stops the
session asked Spark to stop normally: with a task still in flight (a Python worker that never
answers) ``SparkContext.stop`` waited for it forever, so Ctrl-C or a stopped run hung (measured:
one run in four under load, 180 s and counting).

``interrupt_in`` finds the interrupt behind such an error (its ``__context__`` and
``__cause__``); ``noted`` says whether one arrived at all while ``raise_on_signals`` (in
``txntable.jobs.signals``) was in force, even when a handler swallowed everything. Standard
library only, outside the layers: the CLI, the jobs and the Spark executors use it.
"""

from __future__ import annotations

import sys

#: how deep an exception's chain is searched (chains are short; a cycle must not loop)
_DEPTH = 16

_noted: list[KeyboardInterrupt] = []


def interrupt_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """``exc`` when it is a ``KeyboardInterrupt``, else the one it was raised while handling
    or from, if any (both links are followed: ``raise X from Y`` while an interrupt is being
    handled keeps the interrupt in ``__context__``)."""
    todo: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while todo and len(seen) < _DEPTH:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        todo += [current.__cause__, current.__context__]
    return None


def note(interrupt: KeyboardInterrupt) -> None:
    """Record that ``interrupt`` arrived (called by the signal handlers)."""
    _noted.append(interrupt)


def noted() -> KeyboardInterrupt | None:
    """The first interrupt recorded since the last ``forget``, if any."""
    return _noted[0] if _noted else None


def forget() -> None:
    """Forget the recorded interrupts (the handlers that recorded them are gone)."""
    _noted.clear()


def pending() -> KeyboardInterrupt | None:
    """The interrupt this process is handling now: the one behind the exception in flight,
    else one that arrived and may have been swallowed."""
    return interrupt_in(sys.exc_info()[1]) or noted()


def reraise(exc: BaseException) -> None:
    """Raise the interrupt behind ``exc``, if there is one (else return)."""
    interrupt = interrupt_in(exc)
    if interrupt is not None and interrupt is not exc:
        raise interrupt from None


__all__ = ["forget", "interrupt_in", "note", "noted", "pending", "reraise"]
