"""Back off a table whose other writers keep beating our compaction runs.

Deferring recently written partitions (``spec.avoidRecentWrites.within``) keeps a run away from
writes the log already shows; it cannot see writes that start after the run planned. When those
keep coming, each run rewrites bins only to drop them at commit (their inputs were removed by
another writer) or spends its commit attempts retrying. Each finished compaction run's result
line says how many bins it planned and dropped and how many commit attempts it made and lost;
the controller keeps those figures for the newest runs in ``status.conflicts`` (so a restart
does not forget them) and, when over ``backOff.runs`` runs the larger of

* bins dropped / bins planned, and
* commit retries / commit attempts

reaches ``backOff.conflictPercent``, the next compaction waits ``initialDelay`` after the last
run ended, doubled for every conflicting run in a row (the newest ones, each over the threshold
on its own), at most ``maxDelay``. A run that then commits cleanly ends the streak; once the
window's rate falls below the threshold nothing waits.

Pure functions: the controller passes the runs' result lines and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from txntable.api.policies import ConflictBackOff
from txntable.api.table import ConflictStatus, RunConflicts

#: Runs whose figures status keeps (the CRD's maxItems; ``backOff.runs`` is at most this).
KEPT_RUNS = 20


@dataclass(frozen=True, slots=True)
class ConflictHold:
    """The back-off now in force: no compaction before ``until``."""

    until: datetime
    percent: int
    streak: int
    delay_seconds: int
    message: str


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def figures_of(run_name: str, result: Mapping[str, Any] | None) -> RunConflicts | None:
    """What a finished compaction run lost, from its result line (None: no result, a dry run,
    or nothing planned: such a run says nothing about conflicts)."""
    if not result or result.get("dryRun") or result.get("vacuumOnly"):
        return None
    planned = _count(result.get("binsPlanned"))
    engine = result.get("engineMetrics")
    attempts = _count(engine.get("attempts")) if isinstance(engine, Mapping) else 0
    retries = _count(engine.get("retries")) if isinstance(engine, Mapping) else 0
    if planned == 0 and attempts == 0:
        return None
    return RunConflicts(
        run_name=run_name,
        bins_planned=planned,
        bins_dropped=min(planned, _count(result.get("binsSkipped"))),
        commit_attempts=attempts,
        commit_retries=min(attempts, retries),
    )


def remember(
    known: Sequence[RunConflicts], new: Sequence[RunConflicts]
) -> tuple[RunConflicts, ...]:
    """``new`` runs (newest first) in front of ``known`` ones, each run once, ``KEPT_RUNS`` at
    most."""
    seen = {r.run_name for r in new}
    merged = [*new, *(r for r in known if r.run_name not in seen)]
    return tuple(merged[:KEPT_RUNS])


def _percent(runs: Sequence[RunConflicts]) -> int:
    planned = sum(r.bins_planned for r in runs)
    attempts = sum(r.commit_attempts for r in runs)
    dropped = 100 * sum(r.bins_dropped for r in runs) // planned if planned else 0
    retried = 100 * sum(r.commit_retries for r in runs) // attempts if attempts else 0
    return max(dropped, retried)


def conflict_hold(
    runs: Sequence[RunConflicts], settings: ConflictBackOff, last_ended: datetime | None
) -> ConflictHold | None:
    """The back-off ``runs`` (newest first) call for under ``settings``; None when off, when
    no run reported, or when the window's rate is under the threshold. ``last_ended``: when the
    newest compaction run ended (the delay counts from there)."""
    threshold = settings.conflict_percent
    window = list(runs[: settings.runs])
    if threshold is None or not window or last_ended is None:
        return None
    percent = _percent(window)
    if percent < threshold:
        return None
    streak = 0
    for run in window:
        if _percent([run]) < threshold:
            break
        streak += 1
    delay = min(settings.max_delay, settings.initial_delay * 2 ** max(0, streak - 1))
    until = last_ended + timedelta(seconds=delay)
    dropped = sum(r.bins_dropped for r in window)
    planned = sum(r.bins_planned for r in window)
    retries = sum(r.commit_retries for r in window)
    attempts = sum(r.commit_attempts for r in window)
    message = (
        f"our last {len(window)} compaction run(s) lost {percent}% to other writers "
        f"({dropped} of {planned} bins dropped, {retries} of {attempts} commit attempts "
        f"retried; backOff.conflictPercent {threshold}); {streak} conflicting run(s) in a row, "
        f"backing off {timedelta(seconds=delay)}"
    )
    return ConflictHold(until, percent, streak, delay, message)


def conflict_status(
    runs: Sequence[RunConflicts], settings: ConflictBackOff | None, hold: ConflictHold | None
) -> ConflictStatus | None:
    """``status.conflicts`` (None while no run reported figures)."""
    if not runs:
        return None
    window = list(runs[: settings.runs]) if settings is not None else list(runs)
    return ConflictStatus(
        runs=tuple(runs),
        percent=_percent(window),
        back_off_until=hold.until.replace(microsecond=0) if hold is not None else None,
    )
