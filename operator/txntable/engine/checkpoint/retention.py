"""Table properties that steer checkpoints and log cleanup, parsed the way Delta parses them.

Durations such as ``delta.logRetentionDuration`` are Spark calendar-interval strings
(``"interval 30 days"``, ``"1 week"``, ``"interval 1 day 12 hours"``); a wrong value must be a clear
error, never a silently different retention, because retention decides what gets deleted.
Defaults are Delta Spark's (``DeltaConfigs.scala``; PROTOCOL.md "Table Properties").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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

_UNIT_MS = {
    "week": 7 * DAY_MS,
    "day": DAY_MS,
    "hour": 3600 * 1000,
    "minute": 60 * 1000,
    "second": 1000,
    "millisecond": 1,
}
_PART = re.compile(r"(\d+)\s*([a-z]+)")


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a Delta interval string; months and years are refused (not fixed length)."""
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval") :].strip()
    if not body:
        raise InvalidArgumentError(f"empty interval {text!r}")
    total = 0.0
    position = 0
    for match in _PART.finditer(body):
        if body[position : match.start()].strip():
            break
        amount, unit = int(match[1]), match[2].removesuffix("s")
        if unit == "microsecond":
            total += amount / 1000
        elif unit in _UNIT_MS:
            total += amount * _UNIT_MS[unit]
        else:
            raise InvalidArgumentError(
                f"interval {text!r}: unit {match[2]!r} is not supported "
                "(use weeks, days, hours, minutes, seconds or milliseconds)"
            )
        position = match.end()
    if position == 0 or body[position:].strip():
        raise InvalidArgumentError(f"not an interval: {text!r} (expected e.g. 'interval 7 days')")
    return int(total)


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
