"""Cron and maintenance-window evaluation, table-driven with fixed clocks."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

import pytest

from tests.support.decide import HEALTH, NOW, compaction, table, work
from tests.support.manifests import compaction_policy_manifest
from txntable.api.conditions import Reason
from txntable.api.errors import InvalidSpecError
from txntable.api.policies import CRON_BACKWARDS, CRON_PATTERN
from txntable.reconcile.decide import decide_compaction
from txntable.reconcile.policy_status import policy_status
from txntable.reconcile.schedule import ScheduleError, parse_cron, parse_window, zone


def at(text: str, tz: str = "UTC") -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone(tz))


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("0 2 * * *", "2026-11-21 23:59", "2026-11-22 02:00"),
        ("0 2 * * *", "2026-11-22 02:00", "2026-11-23 02:00"),
        ("*/15 * * * *", "2026-11-22 10:07", "2026-11-22 10:15"),
        ("30 1 1 * *", "2026-11-22 00:00", "2026-12-01 01:30"),
        ("0 0 * * mon", "2026-11-22 12:00", "2026-11-23 00:00"),  # 22nd is a Sunday
        ("0 0 * * 7", "2026-11-22 12:00", "2026-11-29 00:00"),  # 7 is Sunday too
        ("0 0 13 * fri", "2026-11-21 00:00", "2026-11-27 00:00"),  # day OR weekday
        ("0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"),
        ("@hourly", "2026-11-22 10:07", "2026-11-22 11:00"),
        ("0 9-17/4 * * 1-5", "2026-11-23 09:00", "2026-11-23 13:00"),
        ("0 0 1 jan,jul *", "2026-02-01 00:00", "2026-07-01 00:00"),
        # '?' (no specific value) passes the CRD pattern in these fields: it means '*'
        ("0 2 ? * *", "2026-11-21 23:59", "2026-11-22 02:00"),
        ("0 0 13 * ?", "2026-11-21 00:00", "2026-12-13 00:00"),
    ],
)
def test_next_after(expr: str, after: str, expected: str) -> None:
    assert parse_cron(expr).next_after(at(after)) == at(expected)


def test_time_zone_is_honoured() -> None:
    cron = parse_cron("0 2 * * *")
    nxt = cron.next_after(at("2026-11-22 00:00", "Europe/Berlin"))
    assert nxt.astimezone(UTC) == datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


def test_last_at_or_before_finds_missed_runs() -> None:
    cron = parse_cron("0 * * * *")
    due = cron.last_at_or_before(at("2026-11-22 10:30"), not_before=at("2026-11-22 07:59"))
    assert due == at("2026-11-22 10:00")
    assert cron.last_at_or_before(at("2026-11-22 10:30"), not_before=at("2026-11-22 10:00")) is None


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "* * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "*/0 * * * *",
        "5-1 * * * *",
        "x * * * *",
        "* * * * funday",
        "1,,2 * * * *",
    ],
)
def test_bad_cron_is_rejected_with_reason(expr: str) -> None:
    with pytest.raises(ScheduleError):
        parse_cron(expr)


def test_unknown_zone() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone"):
        zone("Mars/Olympus")


@pytest.mark.parametrize(
    ("window", "days", "when", "inside"),
    [
        ("01:00-05:00", None, "2026-11-22 01:00", True),
        ("01:00-05:00", None, "2026-11-22 05:00", False),
        ("22:00-04:00", None, "2026-11-22 23:30", True),
        ("22:00-04:00", None, "2026-11-22 03:59", True),
        ("22:00-04:00", None, "2026-11-22 12:00", False),
        ("22:00-04:00", ["sat"], "2026-11-22 03:00", True),  # Sunday 03:00 = Saturday's window
        ("22:00-04:00", ["sun"], "2026-11-22 03:00", False),
        ("00:00-24:00", ["mon"], "2026-11-23 12:00", True),
    ],
)
def test_windows(window: str, days: list[str] | None, when: str, inside: bool) -> None:
    assert parse_window(window, days).contains(at(when)) is inside


@pytest.mark.parametrize("window", ["1-2", "10:00", "25:00-26:00", "10:00-10:00", "aa:bb-01:00"])
def test_bad_windows(window: str) -> None:
    with pytest.raises(ScheduleError):
        parse_window(window)


def test_validation_matches_the_api_server_at_the_end_of_a_string() -> None:
    """A trailing newline passed ``^...$`` in Python (the API server's ECMA regexes refuse it),
    so '0 2 * * *\\n' was accepted here and then broke every reconcile."""
    from txntable.api.errors import InvalidSpecError
    from txntable.api.types import CompactionPolicy

    def policy(schedule: str) -> CompactionPolicy:
        return CompactionPolicy.from_manifest(
            compaction_policy_manifest("p", namespace="n", triggers={"schedule": schedule})
        )

    parse_cron(policy("0 2 ? * *").spec.triggers.schedule or "")
    with pytest.raises(InvalidSpecError, match="schedule"):
        policy("0 2 * * *\n")


# -- issue 23.3: what the API server admits, the controller can evaluate ------------------------
def test_the_backwards_rule_matches_exactly_the_ranges_that_run_backwards() -> None:
    """Every pair of numbers 0-59 (with and without a leading zero), as the first item, a later
    list item and with a step: the CRD's rule refuses a range iff its start is above its end."""
    for a in range(60):
        for b in range(60):
            for left in {str(a), f"{a:02d}"}:
                for right in {str(b), f"{b:02d}"}:
                    for text in (f"{left}-{right} * * * *", f"0 1,{left}-{right}/3 * * *"):
                        assert bool(re.search(CRON_BACKWARDS, text)) is (a > b), text


#: Items of each field: forms the CRD's pattern admits (numbers at the bounds, names, ranges
#: either way round, steps, lists, ``*`` and ``?``), and days that do not occur in some months.
FIELDS = (
    ("*", "59", "*/15", "10-5", "7/20"),
    ("*", "23", "17-9", "0,12"),
    ("*", "?", "31", "30", "20-15", "1-31/2"),
    ("*", "2", "FEB", "MAR-JAN", "JAN/3", "4,6,9,11"),
    ("*", "?", "7", "FRI-MON", "5-0", "1-5/2"),
)


def test_a_schedule_the_crd_admits_is_evaluated_or_reported() -> None:
    """Every combination of field forms: if the CRD (pattern and CEL rule) admits it, the
    parser evaluates it, and its next fire time is found or its never firing is reported by the
    policy's status and the table's decision, never raised."""
    admitted = never = 0
    for combo in itertools.product(*FIELDS):
        text = " ".join(combo)
        if not re.match(CRON_PATTERN, text) or re.search(CRON_BACKWARDS, text):
            with pytest.raises(InvalidSpecError):
                compaction(triggers={"schedule": text})
            continue
        admitted += 1
        cron = parse_cron(text)  # never raises for an admitted schedule
        try:
            cron.next_after(at("2026-11-22 00:00"))
        except ScheduleError:
            never += 1
            policy = compaction(triggers={"schedule": text})
            assert str(policy_status(policy, [], NOW).phase) == "Invalid", text
            decision = decide_compaction(table(), policy, HEALTH, work())
            assert decision.why is Reason.INVALID_SPEC and not decision.launch
    assert admitted > 500 and never > 0  # both cases really occur
