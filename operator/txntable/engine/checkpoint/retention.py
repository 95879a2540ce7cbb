"""Table properties that steer checkpoints and log cleanup, parsed the way Delta parses them.

Durations such as ``delta.logRetentionDuration`` are Spark calendar-interval strings
(``"interval 30 days"``, ``"1 week"``, ``"interval 1 day 12 hours"``), read with the grammar every
duration of txntable shares (``txntable.durations``, which also takes ``30d``); a wrong value must
be a clear error, never a silently different retention, because retention decides what gets
deleted.
Defaults are Delta Spark's (``DeltaConfigs.scala``; PROTOCOL.md "Table Properties").
"""

from __future__ import annotations

from collections.abc import Mapping

from txntable.durations import DurationError, parse_ms
from txntable.engine.errors import InvalidArgumentError

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
LOG_RETENTION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
TXN_RETENTION = "delta.setTransactionRetentionDuration"
EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"

DAY_MS = 24 * 3600 * 1000
DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_LOG_RETENTION_MS = 30 * DAY_MS
DEFAULT_DELETED_FILE_RETENTION_MS = 7 * DAY_MS


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a duration: Delta's interval strings (``interval 7 days``) and the
    compact form (``7d``) alike, one grammar for properties, flags and manifests
    (``txntable.durations``); months and years are refused (not fixed length)."""
    try:
        return parse_ms(text)
    except DurationError as exc:
        raise InvalidArgumentError(str(exc)) from None


def duration_ms(config: Mapping[str, str], key: str, default_ms: int | None) -> int | None:
    """A duration property in ms, or ``default_ms`` when the table does not set it."""
    value = config.get(key)
    if value is None:
        return default_ms
    try:
        return parse_interval_ms(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"table property {key}: {exc}") from None


def bool_property(config: Mapping[str, str], key: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidArgumentError(f"table property {key} must be true or false, got {value!r}")
    return lowered == "true"


def checkpoint_interval(config: Mapping[str, str]) -> int:
    value = config.get(CHECKPOINT_INTERVAL)
    if value is None:
        return DEFAULT_CHECKPOINT_INTERVAL
    try:
        interval = int(value.strip())
    except ValueError:
        interval = 0
    if interval <= 0:
        raise InvalidArgumentError(
            f"table property {CHECKPOINT_INTERVAL} must be a positive integer, got {value!r}"
        )
    return interval
