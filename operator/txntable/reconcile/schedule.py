"""Cron schedules and maintenance windows, evaluated in a time zone.

Policies copy the scheduled-job pattern (CronJob, ScheduledSparkApplication): a five-field cron
``schedule`` plus an IANA ``timeZone``. The evaluator is small and pure so that decisions can be
tested table-driven with an injected clock. Semantics follow Vixie cron as Kubernetes CronJob
does: ``minute hour day-of-month month day-of-week``, lists, ranges, steps, ``*``, names for
months and days, the ``@hourly``/``@daily``/``@weekly``/``@monthly``/``@yearly`` macros, and the
rule that when both day fields are restricted a time matches if *either* matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES: tuple[dict[str, int], ...] = ({}, {}, {}, _MONTHS, _DAYS)
_FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")
_SEARCH_LIMIT = timedelta(days=366 * 5)


class ScheduleError(ValueError):
    """A cron expression, time zone or window that cannot be evaluated."""


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed five-field cron expression."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    def matches(self, t: datetime) -> bool:
        if t.minute not in self.minutes or t.hour not in self.hours or t.month not in self.months:
            return False
        return self._day_matches(t)

    def next_after(self, t: datetime) -> datetime:
        """The first matching minute strictly after ``t`` (``t`` must be timezone-aware)."""
        if t.tzinfo is None:
            raise ScheduleError("next_after needs a timezone-aware time")
        zone = t.tzinfo
        # Walk wall-clock minutes in the zone; skip whole days/hours that cannot match.
        wall = t.replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
        limit = wall + _SEARCH_LIMIT
        while wall < limit:
            if wall.month not in self.months:
                wall = (wall.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(wall):
                wall = wall.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if wall.hour not in self.hours:
                wall = wall.replace(minute=0) + timedelta(hours=1)
                continue
            if wall.minute in self.minutes:
                candidate = wall.replace(tzinfo=zone)
                if candidate > t:
                    return candidate
            wall += timedelta(minutes=1)
        raise ScheduleError(f"schedule {self.expression!r} never fires")

    def _day_matches(self, wall: datetime) -> bool:
        day_ok = wall.day in self.days
        weekday_ok = (wall.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return day_ok or weekday_ok
        return day_ok and weekday_ok

    def last_at_or_before(self, t: datetime, not_before: datetime) -> datetime | None:
        """The newest fire time in ``(not_before, t]``, or ``None``: "is a run due now?"."""
        latest: datetime | None = None
        cursor = not_before
        while True:
            nxt = self.next_after(cursor)
            if nxt > t:
                return latest
            latest, cursor = nxt, nxt


def _parse_field(text: str, index: int) -> frozenset[int]:
    low, high = _BOUNDS[index]
    names = _NAMES[index]
    values: set[int] = set()

    def number(token: str) -> int:
        token = token.lower()
        if token in names:
            return names[token]
        if not token.isdigit():
            raise ScheduleError(f"bad {_FIELD_NAMES[index]} value {token!r}")
        value = int(token)
        if not low <= value <= high:
            raise ScheduleError(f"{_FIELD_NAMES[index]} {value} is outside {low}-{high}")
        return value

    for part in text.split(","):
        if not part:
            raise ScheduleError(f"empty item in {_FIELD_NAMES[index]} field {text!r}")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ScheduleError(f"bad step {step_text!r} in {_FIELD_NAMES[index]} field")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = number(a), number(b)
            if start > end:
                raise ScheduleError(f"range {base!r} runs backwards in {_FIELD_NAMES[index]}")
        else:
            start = number(base)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:  # both 0 and 7 mean Sunday
        values.discard(7)
        values.add(0)
    return frozenset(values)


def parse_cron(expression: str) -> Cron:
    """Parse a cron expression; raises ``ScheduleError`` with the offending field."""
    text = _MACROS.get(expression.strip().lower(), expression.strip())
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"schedule {expression!r} must have 5 fields (minute hour day month weekday)"
        )
    # '?' (no specific value) in day-of-month or weekday means '*', as in CronJob's parser; the
    # CRD accepts it there, so the parser must too
    fields = [("*" if f == "?" and i in (2, 4) else f) for i, f in enumerate(fields)]
    parsed = [_parse_field(f, i) for i, f in enumerate(fields)]
    return Cron(
        expression=expression,
        minutes=parsed[0],
        hours=parsed[1],
        days=parsed[2],
        months=parsed[3],
        weekdays=parsed[4],
        days_restricted=fields[2] != "*",
        weekdays_restricted=fields[4] != "*",
    )


def zone(name: str | None) -> ZoneInfo:
    """An IANA time zone (``None`` or empty means UTC)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {name!r}") from exc


@dataclass(frozen=True, slots=True)
class Window:
    """A daily maintenance window ``HH:MM-HH:MM`` (may wrap midnight) on some weekdays."""

    start_minute: int
    end_minute: int
    weekdays: frozenset[int]  # 0 = Sunday; empty = every day

    def contains(self, t: datetime) -> bool:
        minute = t.hour * 60 + t.minute
        weekday = t.isoweekday() % 7
        if self.start_minute <= self.end_minute:
            return self.start_minute <= minute < self.end_minute and self._day(weekday)
        # Wrapping window: the part after midnight belongs to the previous day's window.
        if minute >= self.start_minute:
            return self._day(weekday)
        return minute < self.end_minute and self._day((weekday - 1) % 7)

    def _day(self, weekday: int) -> bool:
        return not self.weekdays or weekday in self.weekdays


def parse_window(text: str, weekdays: list[str] | None = None) -> Window:
    """``"22:00-04:00"`` plus optional day names (``["mon", "tue"]``)."""

    def minutes(hhmm: str) -> int:
        hh, sep, mm = hhmm.strip().partition(":")
        if not sep or not hh.isdigit() or not mm.isdigit():
            raise ScheduleError(f"bad time {hhmm!r} in window {text!r} (want HH:MM)")
        h, m = int(hh), int(mm)
        if not (0 <= h <= 24 and 0 <= m <= 59) or (h == 24 and m != 0):
            raise ScheduleError(f"bad time {hhmm!r} in window {text!r}")
        return h * 60 + m

    start, sep, end = text.partition("-")
    if not sep:
        raise ScheduleError(f"window {text!r} must look like HH:MM-HH:MM")
    days: set[int] = set()
    for name in weekdays or []:
        key = name.strip().lower()[:3]
        if key not in _DAYS:
            raise ScheduleError(f"unknown weekday {name!r} in window")
        days.add(_DAYS[key])
    s, e = minutes(start), minutes(end)
    if s == e:
        raise ScheduleError(f"window {text!r} is empty")
    return Window(s, e, frozenset(days))
