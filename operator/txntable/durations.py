"""One duration syntax for every place a person writes one: ``7d``, ``7 days``, ``1h30m``,
``interval 1 day 12 hours``.

Durations reach txntable from three sides that used to disagree: Delta table properties and the
retention flags of ``vacuum``/``cleanup``/``optimize --vacuum-retention`` took Spark's calendar
intervals (``interval 7 days``) and refused ``7d``, while manifests and
``--avoid-partitions-written-within`` took Go-style ``7d`` and refused ``7 days``. A user who
learnt one form met an error with the other. Here is the one grammar all of them share:

* a sequence of ``<whole number> <unit>`` parts, space between the number and its unit and
  between parts optional, in any order (``1h30m``, ``1h 30m``, ``1 day 12 hours``);
* units ``d``/``day(s)``, ``h``/``hour(s)``, ``m``/``minute(s)``, ``s``/``second(s)``,
  ``week(s)``, and, outside manifests, ``millisecond(s)`` and ``microsecond(s)``;
* an optional leading ``interval`` (Spark SQL's spelling, what Delta table properties hold).

It lives outside ``txntable.api`` and ``txntable.engine`` because both use it and neither may
import the other; it imports only the standard library.

Manifests (and so the CRDs) admit whole seconds longer than zero, because the controller keeps
durations in seconds: ``MANIFEST_PATTERN`` is that subset written as the CRDs' ``pattern`` (RE2
and ECMA-262 alike: no look-ahead, no flags), and ``parse_manifest_seconds`` accepts exactly the
strings it matches, so what the API server admits the controller reads and nothing else.
Month and year units are refused everywhere: they have no fixed length.
"""

from __future__ import annotations

import re
from typing import Final

_MS: Final = {
    "week": 7 * 86_400_000,
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1000,
    "millisecond": 1,
}
#: unit spelling -> (unit name, milliseconds per unit; microseconds are the one fraction)
_UNITS: Final[dict[str, tuple[str, float]]] = {
    "d": ("day", _MS["day"]),
    "h": ("hour", _MS["hour"]),
    "m": ("minute", _MS["minute"]),
    "s": ("second", _MS["second"]),
    **{f"{name}{plural}": (name, ms) for name, ms in _MS.items() for plural in ("", "s")},
    "microsecond": ("microsecond", 0.001),
    "microseconds": ("microsecond", 0.001),
}
_SUB_SECOND: Final = frozenset({"millisecond", "microsecond"})


def _alternation(spellings: list[str]) -> str:
    """A regex alternation trying longer spellings first (``ms`` before ``m``)."""
    return "|".join(sorted(spellings, key=lambda s: (-len(s), s)))


_UNIT_RE: Final = _alternation(list(_UNITS))
_WHOLE_SECOND_UNITS: Final = _alternation(
    [u for u, (n, _) in _UNITS.items() if n not in _SUB_SECOND]
)
_PART: Final = re.compile(rf"([0-9]+) *({_UNIT_RE})")
_DURATION: Final = re.compile(rf"(interval +)?[0-9]+ *({_UNIT_RE})( *[0-9]+ *({_UNIT_RE}))*")

#: What a manifest duration field admits (the CRDs' ``pattern``): the grammar above with units
#: of whole seconds, and at least one part that is not zero (``0s`` would mean "never wait").
MANIFEST_PATTERN: Final = (
    rf"^(interval +)?([0-9]+ *({_WHOLE_SECOND_UNITS}) *)*"
    rf"[0-9]*[1-9][0-9]* *({_WHOLE_SECOND_UNITS})( *[0-9]+ *({_WHOLE_SECOND_UNITS}))*$"
)
_MANIFEST: Final = re.compile(MANIFEST_PATTERN[1:-1])

EXAMPLES: Final = "7d, 7 days, 1h30m, 90s, interval 1 day 12 hours"


class DurationError(ValueError):
    """A duration string does not follow the grammar (or is not allowed where it was given)."""


def parse_ms(text: str) -> int:
    """Milliseconds of a duration in the shared grammar; zero is allowed (``0 hours`` is a
    retention some commands take with ``--force``). Letters are case-insensitive and the text
    is trimmed, as Spark reads ``INTERVAL 7 DAYS``."""
    if not isinstance(text, str):
        raise DurationError(f"{text!r} is not a duration (e.g. {EXAMPLES})")
    body = text.strip().lower()
    if _DURATION.fullmatch(body) is None:
        raise DurationError(_why_not(text, body))
    total = 0.0
    for amount, unit in _PART.findall(body.removeprefix("interval")):
        total += int(amount) * _UNITS[unit][1]
    return int(total)


def parse_manifest_seconds(text: str) -> int:
    """Seconds of a manifest duration: exactly the strings ``MANIFEST_PATTERN`` admits, as the
    API server checks them (case-sensitive, no surrounding spaces, whole seconds, not zero)."""
    if not isinstance(text, str) or _MANIFEST.fullmatch(text) is None:
        body = text.strip().lower() if isinstance(text, str) else ""
        if isinstance(text, str) and _DURATION.fullmatch(body) is not None:
            if any(_UNITS[u][0] in _SUB_SECOND for _, u in _PART.findall(body)):
                raise DurationError(f"{text!r}: a manifest duration is whole seconds (e.g. 1s)")
            if body != text:
                raise DurationError(f"{text!r}: write it in lower case without spaces around")
            raise DurationError(f"{text!r} must be longer than zero")
        raise DurationError(_why_not(text, body) if isinstance(text, str) else f"{text!r}")
    return parse_ms(text) // 1000


def _why_not(text: str, body: str) -> str:
    """Why ``text`` is no duration, naming a unit nobody supports when that is the reason."""
    for unit in re.findall(r"[0-9] *([a-z]+)", body):
        if unit not in _UNITS and unit != "interval":
            if unit.rstrip("s") in ("month", "year", "mon", "y"):
                return f"{text!r}: months and years have no fixed length; use days or weeks"
            return (
                f"{text!r}: unknown unit {unit!r} (use d/days, h/hours, m/minutes, s/seconds, "
                "weeks, milliseconds)"
            )
    return f"{text!r} is not a duration (e.g. {EXAMPLES})"


def format_seconds(seconds: int) -> str:
    """Seconds in the largest exact compact unit (``86400`` -> ``1d``, ``5400`` -> ``90m``)."""
    if seconds <= 0:
        raise DurationError(f"{seconds} must be longer than zero")
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % factor == 0:
            return f"{seconds // factor}{unit}"
    return f"{seconds}s"


__all__ = [
    "EXAMPLES",
    "MANIFEST_PATTERN",
    "DurationError",
    "format_seconds",
    "parse_manifest_seconds",
    "parse_ms",
]
