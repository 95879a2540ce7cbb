"""Adopting a finished run once: the record status keeps of the newest run of each kind.

A finished run is adopted once: its record, its ``Run<Outcome>`` Event and its metrics are
produced the first time the run is seen finished, never again (idempotent by run name, in memory
and through the status). The newest record of each kind (and the newest VACUUM's start) is kept
in memory too, not only in the status: the status a tick reads is the last watch event's, which
may come from before a run was even launched, and once a finished run's object is deleted (a
history limit of 0) nothing else would say that the run took place, so the same run (the same
name: the same minute's slot) was launched again inside the policy's cooldown.

What the record and the Event say comes from the job's own result line first (its ``error``,
what it committed before failing, the figures of its VACUUM), on every backend: a finished run
listed without its result (cluster listings carry none) is read once in detail
(``Launcher.status``: the driver's log) before it is recorded. The backend's message (a local
run's exit code and stderr filtered of log noise, a Job's or SparkApplication's failure) is the
fallback. A run whose result says a table feature stopped it (``errorType``
``UnsupportedFeature``) is reported so the step can be held (``controller.holds``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from txntable.api.conditions import Event, EventReason
from txntable.api.types import RunKind, RunOutcome, RunRecord, TxnTable
from txntable.controller.memory import TableMemories
from txntable.engine import EngineError, Table, iceberg_hold_note
from txntable.jobs import UNSUPPORTED_FEATURE
from txntable.launch import RunState, RunStatus, attempt_of
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.run_report import failure_note, planning_note
from txntable.reconcile.decide import outcome_of, vacuumed

log = logging.getLogger(__name__)

#: Finished runs remembered per table (so each is recorded once); older names are forgotten.
RECORDED_RUNS_KEPT = 16
#: The order status keeps its records in (``lastCompaction``, ``lastCheckpoint``,
#: ``lastVacuum``) and the order ``failures_in_a_row`` reads them in.
KINDS = (RunKind.OPTIMIZE, RunKind.CHECKPOINT, RunKind.VACUUM)

Records = tuple[RunRecord | None, RunRecord | None, RunRecord | None]


@dataclass(frozen=True, slots=True)
class _Newest:
    """What a table's last tick ended with: its records (``KINDS`` order) and last VACUUM."""

    records: Records
    vacuum_time: datetime | None


@dataclass
class Recorded:
    """One table's sub-record of ``RunRecords`` (``controller.memory``): the record made for each
    finished run already adopted, by run name (the newest ``RECORDED_RUNS_KEPT``), and what the
    table's last tick ended with."""

    by_run: dict[str, RunRecord] = field(default_factory=dict)
    #: what the table's last tick ended with (the status a tick reads may lag behind it)
    newest: _Newest | None = None
    #: the ``RunCannotStart`` Event said of a run in flight, by run name (said once per reason)
    waiting_said: dict[str, str] = field(default_factory=dict)


@dataclass
class RunRecords:
    """Per table (``Recorded``): the record made for each finished run already adopted, by
    run name, and the newest record of each kind and VACUUM time a tick ended with."""

    clock: Callable[[], datetime]
    metrics: ControllerMetrics | None = None
    memories: TableMemories = field(default_factory=TableMemories)

    def remember(self, key: str, records: Records, vacuum_time: datetime | None) -> None:
        """What the tick of ``key`` ended with (runs it started included): the next ticks
        start from it when the status they read is older."""
        self.memories.of(key, Recorded).newest = _Newest(records, vacuum_time)

    def vacuum_time(self, key: str, known: datetime | None) -> datetime | None:
        """The later of ``known`` (the status read) and the last VACUUM time remembered."""
        recorded = self.memories.peek(key, Recorded)
        newest = recorded.newest if recorded is not None else None
        found = [t for t in (known, newest.vacuum_time if newest else None) if t is not None]
        return max(found) if found else None

    def adopt(
        self,
        table: TxnTable,
        runs: Sequence[RunStatus],
        engine_table: Table | None,
        events: list[Event],
        *,
        detail: Callable[[RunStatus], RunStatus] = lambda run: run,
        unsupported: list[tuple[RunKind, str]] | None = None,
    ) -> Records:
        """The newest record of each kind (``KINDS`` order) after ``runs``: a run seen
        finished for the first time is recorded (``detail`` reads what its listing lacks);
        ``unsupported`` gets (kind, message) of each such run a table feature stopped."""
        key = table.metadata.key
        status = table.status
        records = [status.last_compaction, status.last_checkpoint, status.last_vacuum]
        recorded = self.memories.of(key, Recorded)
        known = recorded.newest
        if known is not None:  # the status read may lag behind what this controller knows
            records = [_later(*pair) for pair in zip(records, known.records, strict=True)]
        seen = recorded.by_run
        for index, kind in enumerate(KINDS):
            stale = records[index]
            if stale is not None and stale.outcome in (RunOutcome.RUNNING, None):
                # recorded finished already (its object may be gone: history limits)
                records[index] = seen.get(stale.run_name, stale)
            mine = [r for r in runs if r.kind == kind]
            if not mine:
                continue
            newest = max(mine, key=lambda r: (r.created or r.started or _EPOCH, r.name))
            previous = records[index]
            if (
                previous is not None
                and previous.run_name != newest.name
                and _older(newest, previous)
            ):
                continue  # e.g. an inline checkpoint came after the newest launched run
            if not newest.state.finished:
                sized = newest.sizing if kind == RunKind.OPTIMIZE else None
                notes = [sized.running_note() if sized else None]
                if newest.waiting:
                    notes.append(f"cannot start: {newest.waiting}")
                    self._say_waiting(recorded, newest, events)
                records[index] = RunRecord(
                    run_name=newest.name,
                    table=table.metadata.name,
                    outcome=RunOutcome.RUNNING,
                    start_time=(newest.started or newest.created or self.clock()).replace(
                        microsecond=0
                    ),
                    version=previous.version if previous else None,
                    message="; ".join(n for n in notes if n)[:4000] or None,
                )
                continue
            if (
                previous
                and previous.run_name == newest.name
                and previous.outcome not in (RunOutcome.RUNNING, None)
            ):
                seen.setdefault(newest.name, previous)
                continue  # already recorded (the status says so)
            if newest.name in seen:
                records[index] = seen[newest.name]  # recorded; the status lags behind
                continue
            run = detail(newest) if newest.result is None else newest
            record = self._finished(table, run, engine_table, events)
            records[index] = seen[newest.name] = record
            for name in list(seen)[:-RECORDED_RUNS_KEPT]:
                del seen[name]
            if unsupported is not None and _stopped_by_feature(run):
                unsupported.append((kind, record.message or run.name))
        return records[0], records[1], records[2]

    @staticmethod
    def _say_waiting(recorded: Recorded, run: RunStatus, events: list[Event]) -> None:
        """A Warning ``RunCannotStart`` once per run and reason (the pod's own words)."""
        if recorded.waiting_said.get(run.name) == run.waiting:
            return
        recorded.waiting_said[run.name] = run.waiting
        while len(recorded.waiting_said) > RECORDED_RUNS_KEPT:
            recorded.waiting_said.pop(next(iter(recorded.waiting_said)))
        noun = (run.kind or RunKind.CHECKPOINT).noun
        said = f"{noun} run {run.name} cannot start: {run.waiting}"
        events.append(Event("Warning", EventReason.RUN_CANNOT_START, said[:1024]))

    def _finished(
        self, table: TxnTable, run: RunStatus, engine_table: Table | None, events: list[Event]
    ) -> RunRecord:
        """The record, Event and metrics of ``run``, finished and seen for the first time."""
        result = dict(run.result) if run.result else None
        outcome = outcome_of_run(run)
        noun = (run.kind or RunKind.CHECKPOINT).noun
        notes: list[str] = []
        reason = failure_reason(run) if outcome is RunOutcome.FAILED else ""
        partial = failure_note(result) if outcome is RunOutcome.FAILED else None
        if partial:
            notes.append(partial)
        if reason:
            notes.append(reason)
        elif run.message:
            notes.append(run.message)
        if outcome is RunOutcome.SUCCEEDED and run.kind == RunKind.OPTIMIZE and engine_table:
            confirmed = _confirmed_in_log(engine_table, run.name)
            notes.append(
                "commit confirmed in the table log" if confirmed else "no commit of this run found"
            )
        vacuum = result.get("vacuum") if result else None
        if isinstance(vacuum, Mapping):
            if run.kind == RunKind.VACUUM:
                notes.append(_vacuum_note(vacuum))
            held = iceberg_hold_note(vacuum.get("iceberg"))  # a UniForm table (ADR 0010)
            if held:
                notes.append(f"VACUUM {held}")
        planning = planning_note(result)  # partitions deferred, rewritten bytes dropped
        if planning:
            notes.append(planning)
        if run.out_of_memory and outcome is RunOutcome.FAILED:
            notes.append("out of memory")
            events.append(
                Event(
                    "Warning",
                    EventReason.RUN_OUT_OF_MEMORY,
                    f"{noun} run {run.name} ran out of memory",
                )
            )
        message = "; ".join(notes)
        said = f"{noun} run {run.name}: {outcome.value}" + (f": {message}" if message else "")
        events.append(
            Event(
                "Normal" if outcome is not RunOutcome.FAILED else "Warning",
                EventReason.for_outcome(outcome),
                said[:1024],
            )
        )
        if self.metrics is not None:
            seconds = (
                (run.finished - run.started).total_seconds()
                if run.finished and run.started
                else None
            )
            self.metrics.run_finished(
                table.metadata.namespace or "default",
                table.metadata.name,
                run.kind,
                outcome,
                seconds=seconds,
                result=result,
                partial=partial is not None,
            )
        version = result.get("version") if result else None
        return RunRecord(
            run_name=run.name,
            table=table.metadata.name,
            outcome=outcome,
            start_time=_whole(run.started or run.created),
            completion_time=_whole(run.finished),
            version=version if isinstance(version, int) else None,
            message=message[:4000] or None,
        )


def outcome_of_run(run: RunStatus) -> RunOutcome:
    """A finished run's outcome from its result line (when known) and its exit state."""
    return outcome_of(dict(run.result) if run.result else None, run.state is RunState.SUCCEEDED)


def failure_reason(run: RunStatus) -> str:
    """Why ``run`` failed: the job's own ``error`` from its result line when it printed one,
    else the backend's message (a local run's exit code and its last stderr line that is not
    log noise; a Job's or SparkApplication's reason)."""
    error = run.result.get("error") if run.result else None
    if not isinstance(error, str) or not error.strip():
        return run.message
    error = error.strip()
    if not run.message or error in run.message:
        return run.message or error
    return f"{error} ({run.message})"


def _stopped_by_feature(run: RunStatus) -> bool:
    return bool(
        run.state is RunState.FAILED
        and run.result
        and run.result.get("errorType") == UNSUPPORTED_FEATURE
    )


def failures_in_a_row(records: Records) -> dict[RunKind, int]:
    """Per run kind (``KINDS`` order in ``records``), the failures in a row its newest record
    shows: a failed run's attempt number + 1, a running retry's attempt number, 0 after a
    success (the count travels in the run names, ``launch.attempt_of``, so it survives restarts
    and history limits)."""
    out: dict[RunKind, int] = {}
    for kind, record in zip(KINDS, records, strict=True):
        if record is None or record.outcome is None:
            continue
        attempt = attempt_of(record.run_name)
        if record.outcome == RunOutcome.FAILED:
            out[kind] = attempt + 1
        elif record.outcome == RunOutcome.RUNNING:
            out[kind] = attempt
        elif record.outcome in (RunOutcome.SUCCEEDED, RunOutcome.NOTHING_TO_DO):
            out[kind] = 0
    return out


def retries_running(records: Records) -> tuple[str, ...]:
    """What status says of each run in flight that retries failed ones (its name's attempt)."""
    out = []
    for kind, record in zip(KINDS, records, strict=True):
        if record is None or record.outcome != RunOutcome.RUNNING:
            continue
        attempt = attempt_of(record.run_name)
        if attempt:
            out.append(
                f"{kind.noun} run {record.run_name} retries after {attempt} failure(s) in a row"
            )
    return tuple(out)


def last_vacuum_time(
    known: datetime | None, runs: Sequence[RunStatus], *, compaction_vacuums: bool
) -> datetime | None:
    """The later of ``known`` (the status) and the start of the newest finished run that
    VACUUMed the table (a VACUUM-only run, or a compaction run that ended with VACUUM): its
    VACUUM began no earlier, so it swept at least what was past the retention then."""
    times = [
        _whole(r.started or r.created or r.finished)
        for r in runs
        if r.state.finished
        and vacuumed(
            r.kind,
            r.result,
            r.state is RunState.SUCCEEDED,
            compaction_vacuums=compaction_vacuums,
        )
    ]
    found = [t for t in (known, *times) if t is not None]
    return max(found) if found else None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _vacuum_note(doc: Mapping[str, Any]) -> str:
    """What a VACUUM-only run did, for its record's message."""
    verb = "would delete" if doc.get("dryRun") else "deleted"
    return f"VACUUM {verb} {doc.get('numFiles', 0)} files ({doc.get('bytes', 0)} bytes)"


def _whole(moment: datetime | None) -> datetime | None:
    return moment.replace(microsecond=0) if moment else None


def _later(read: RunRecord | None, known: RunRecord | None) -> RunRecord | None:
    """Of the record in the status ``read`` and the one ``known`` from this controller's last
    tick: the later run's; for the same run, the finished one; else the known one (the status
    was written from it, or lags behind it)."""
    if read is None or known is None:
        return known or read
    if read.run_name == known.run_name:
        finished = known.outcome not in (RunOutcome.RUNNING, None)
        return known if finished or read.outcome in (RunOutcome.RUNNING, None) else read
    if read.start_time and known.start_time and read.start_time > known.start_time:
        return read
    return known


def _older(run: RunStatus, record: RunRecord) -> bool:
    """Whether ``run`` began before the run ``record`` describes (seconds, as in status)."""
    began = _whole(run.created or run.started)
    return bool(began and record.start_time and began < record.start_time)


def _confirmed_in_log(table: Table, run_id: str, depth: int = 200) -> bool:
    """Whether a commit of the run (``commitInfo.txntableRunId``) is in the recent log."""
    try:
        return any(h.get("txntableRunId") == run_id for h in table.history(limit=depth))
    except EngineError:
        return False
