"""How the controller process logs: Kopf's own formatters, JSON in the cluster.

A hand-made JSON format string (``'{"message":"%(message)s"}'``) breaks on the first quote or
newline in a message; Kopf's JSON formatter serialises each record properly (one object per
line, ``extra`` fields such as ``table`` and ``run`` as keys, tracebacks escaped), and Kopf's
per-object loggers add the object reference. Used by ``python -m txntable``.

Kopf logs every successful run of a handler at INFO ("Timer 'reconcile' succeeded."): with a
timer per table that was a line per table per interval, 340 lines a second at 10,000 tables and
a 30 s interval, 29 million a day saying nothing an absent error does not. ``RoutineSuccess``
drops those lines of the handlers that run routinely (per table per interval, per event) unless
the level is DEBUG; the deletion handler's success and everything else Kopf says stay.

It also drops Kopf's WARNING that a table's commit-events daemon "is cancelled": the daemon waits
in asyncio, and Kopf stops it by cancelling it right after setting its ``stopped`` flag, the
way Kopf recommends for async daemons, whenever a table is deleted or the controller stops. It
said so once per table at every stop (thousands of warnings per rolling update with shards,
where every replica runs a daemon for every table) and meant nothing was wrong.
"""

from __future__ import annotations

import logging

import kopf

from txntable.config import Config

#: the daemons that Kopf stops by cancelling them (async, asleep in asyncio)
CANCELLED_TO_STOP = ("commit-events",)
#: the handlers (the Kopf glue's ids) that succeed at every firing or event
ROUTINE = (
    "reconcile",
    "compaction-policy-status",
    "checkpoint-policy-status",
    "spec-changes",
    "judge-compaction-policy",
    "judge-checkpoint-policy",
    "compaction_policies",
    "checkpoint_policies",
)


class RoutineSuccess(logging.Filter):
    """Drops Kopf's INFO line of a routine handler's success (``ROUTINE``), and its WARNING
    that a daemon stopped by cancellation was cancelled (``CANCELLED_TO_STOP``)."""

    def __init__(
        self, ids: tuple[str, ...] = ROUTINE, cancelled: tuple[str, ...] = CANCELLED_TO_STOP
    ) -> None:
        super().__init__()
        kinds = ("Handler", "Timer", "Indexer", "Daemon")
        self._quiet = frozenset(f"{kind} {i!r} succeeded." for kind in kinds for i in ids)
        self._stopped = frozenset(f"Daemon {i!r} is cancelled. Will escalate." for i in cancelled)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING:
            return record.msg not in self._stopped
        return record.levelno != logging.INFO or record.msg not in self._quiet


def configure_logging(config: Config) -> None:
    """Install Kopf's log handler with the configured format and level on the root logger;
    below DEBUG, without the routine handlers' success lines (``RoutineSuccess``)."""
    kopf.configure(
        log_format=kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL,
        debug=config.log_level == "DEBUG",
    )
    logging.getLogger().setLevel(config.log_level)
    objects = logging.getLogger("kopf.objects")
    for old in [f for f in objects.filters if isinstance(f, RoutineSuccess)]:
        objects.removeFilter(old)
    if config.log_level != "DEBUG":
        objects.addFilter(RoutineSuccess())
