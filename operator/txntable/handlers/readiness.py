"""What the readiness probe checks: the controller has started and Kopf is not paused by peering.

After a crash the new controller finds its predecessor's entry in the KopfPeering object, alive
for up to the peering lifetime (60 s), and Kopf pauses every handler until it expires (two
operators of one priority never run together). Kopf's liveness endpoint answers all along (its
loop is fine), so it cannot tell readiness: ``/readyz`` on the metrics port does
(``observability.server``), from this object.

Kopf keeps the pause in a toggle it does not expose; it logs each change on its peering logger
(``Pausing operations in favour of ...`` or ``Pausing all operators, including self``, and
``Resuming operations after the pause``), once per change and per peering object. ``PeeringWatch``
is a logging handler on that logger that counts them: paused while a pause has not been followed
by its resume. The logger is set to INFO so that the resume is seen whatever the configured
level. tests/integration/test_controller_readiness.py drives Kopf's own peering code to hold
this to the installed Kopf. Pure and thread-safe; no Kopf import.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

#: Kopf's logger for peering decisions (``kopf._core.engines.peering``).
PEERING_LOGGER: Final = "kopf._core.engines.peering"
_PAUSE: Final = "Pausing "
_RESUME: Final = "Resuming operations"


class PeeringWatch(logging.Handler):
    """Counts Kopf's peering pauses and resumes from its log records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._paused = 0
        self._said = ""
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        with self._guard:
            if message.startswith(_PAUSE):
                self._paused += 1
                self._said = message[:512]
            elif message.startswith(_RESUME):
                self._paused = max(0, self._paused - 1)

    @property
    def paused(self) -> str | None:
        """Why Kopf is paused (its own words), or None when it is not."""
        with self._guard:
            return self._said if self._paused else None

    def install(self) -> PeeringWatch:
        """Attach to Kopf's peering logger (at INFO, so resumes are seen)."""
        logger = logging.getLogger(PEERING_LOGGER)
        if self not in logger.handlers:
            logger.addHandler(self)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        return self

    def uninstall(self) -> None:
        logging.getLogger(PEERING_LOGGER).removeHandler(self)


class Readiness:
    """Ready once the startup handler has finished, and while Kopf is not paused by peering."""

    def __init__(self, peering: PeeringWatch | None = None) -> None:
        self.peering = peering or PeeringWatch()
        self._started = threading.Event()

    def started(self) -> None:
        self._started.set()

    def report(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details) for ``/readyz``."""
        if not self._started.is_set():
            return False, {"ready": False, "reason": "the startup handler has not finished"}
        paused = self.peering.paused
        if paused is not None:
            return False, {
                "ready": False,
                "reason": "Kopf is paused by peering (another controller of the same or a "
                f"higher priority is alive, or was until its lifetime ends): {paused}",
            }
        return True, {"ready": True}
