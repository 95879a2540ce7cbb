"""How the controller process logs: Kopf's own formatters, JSON in the cluster.

A hand-made JSON format string (``'{"message":"%(message)s"}'``) breaks on the first quote or
newline in a message; Kopf's JSON formatter serialises each record properly (one object per
line, ``extra`` fields such as ``table`` and ``run`` as keys, tracebacks escaped), and Kopf's
per-object loggers add the object reference. Used by ``python -m txntable``.
"""

from __future__ import annotations

import logging

import kopf

from txntable.config import Config


def configure_logging(config: Config) -> None:
    """Install Kopf's log handler with the configured format and level on the root logger."""
    kopf.configure(
        log_format=kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL,
        debug=config.log_level == "DEBUG",
    )
    logging.getLogger().setLevel(config.log_level)
