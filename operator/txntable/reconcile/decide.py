"""Pure decisions: should a compaction, a VACUUM or a checkpoint of this table start now, and if
not, why?

Inputs are plain values (the table resource, its policy, the observed health, the runs in flight,
the clock); the output is a ``Decision`` whose reason and message end up in a status condition, so
a user can always see why nothing happened. Guards are checked in a fixed order, the first that
applies wins: suspension, protocol, work in flight, nothing to do, maintenance windows, the
back-off after a failed run, the conflict back-off (``reconcile.conflicts``), the triggers and
cooldown; a due compaction under a policy with ``requireApproval`` then waits until the table's
annotation ``txntable.io/approve-plan`` names the current plan (``Work.plan_id``) and that approval
was not spent on an earlier run (``Work.spent_approval``: one approval starts one run). Only a run
that is due (and approved) is held by the operator-wide run limit: a table with nothing due
never reports ``ConcurrencyLimit``, so its status does not flip each time another table's run
starts or ends. A launch after a failed run is the next attempt (``Decision.attempt``): its run
gets a new name, so it is never mistaken for the finished run it retries.

A VACUUM-only run (``decide_vacuum``) is for a table the compaction leaves alone: every compaction
run of a policy with ``spec.vacuum.enabled`` ends with VACUUM, so the VACUUM-only run waits while
a compaction run starts or runs, and otherwise starts once the observed reclaimable bytes reach
``spec.vacuum.minReclaimableBytes`` and the table's last VACUUM (of either kind of run) is
``spec.vacuum.interval`` old. Tombstones stay in the log until a checkpoint drops them, so the
reclaimable bytes of a table nobody writes stay above zero after its VACUUM; such a table is not
vacuumed again while every removed file in its log was already past the retention when the last
VACUUM started (``lastVacuumTime``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from txntable.api.conditions import Reason
from txntable.api.constants import ANNOTATION_APPROVE_PLAN
from txntable.api.types import (
    CheckpointMode,
    CheckpointPolicy,
    CompactionPolicy,
    ConcurrencyPolicy,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.reconcile.health import TableHealth, swept_before
from txntable.reconcile.schedule import ScheduleError, parse_cron, parse_window, zone

#: Without a previous run, a cron fire time counts as due when it is at most this old
#: (CronJob's startingDeadlineSeconds): creating a policy never replays a day of schedules.
STARTING_DEADLINE = timedelta(hours=1)


class Placement(StrEnum):
    """Where a checkpoint is written."""

    INLINE = "Inline"
    SPARK = "Spark"


@dataclass(frozen=True, slots=True)
class ActiveRun:
    """A run in flight for a table (from the launcher's listing)."""

    name: str
    kind: RunKind | None  # None: a run whose kind label is missing or unknown
    started: datetime | None = None
    #: why a pod of the run cannot start (``RunStatus.waiting``); empty when none
    waiting: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, RunKind | None):  # the label's text
            object.__setattr__(self, "kind", RunKind.of(self.kind))


@dataclass(frozen=True, slots=True)
class Retry:
    """The back-off after a failed run: the next launch is attempt ``attempt``, not before
    ``not_before`` (computed by the caller from the failure count and the policy); None: not
    until what ``message`` names changes (a run out of memory at the policy's ceiling)."""

    attempt: int
    not_before: datetime | None
    message: str


@dataclass(frozen=True, slots=True)
class Hold:
    """Compaction held back until ``not_before`` for a reason other than a failed run (the
    conflict back-off of ``reconcile.conflicts``)."""

    not_before: datetime
    message: str


@dataclass(frozen=True, slots=True)
class Work:
    """The work in flight and the clock, as seen at one reconcile tick."""

    now: datetime
    active: tuple[ActiveRun, ...] = ()  # runs of this table
    active_total: int = 0  # runs of all tables
    max_concurrent_runs: int = 4
    #: Back-off after a failed run, per run kind.
    retries: dict[RunKind, Retry] = field(default_factory=dict)
    #: Compaction held back because our recent runs kept conflicting (None: not held).
    conflicts: Hold | None = None
    #: The current plan's id (``status.plan.planId``), for ``spec.requireApproval``.
    plan_id: str | None = None
    #: The approval an earlier run was started with (``status.spentApproval``): spent.
    spent_approval: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """Start (``launch``) or not, and why; for a launch, the deterministic schedule slot."""

    launch: bool
    why: Reason
    message: str
    scheduled_time: datetime | None = None
    trigger: str | None = None
    replace_runs: tuple[str, ...] = field(default=())
    placement: Placement | None = None
    #: 0 for a fresh run; n for the n-th retry after consecutive failures.
    attempt: int = 0
    #: The plan approval (``txntable.io/approve-plan``) this launch spends, if it needed one.
    approval: str | None = None


def _wait(why: Reason, message: str) -> Decision:
    return Decision(False, why, message)


def _backing_off(work: Work, kind: RunKind) -> Decision | None:
    retry = work.retries.get(kind)
    if retry is None:
        return None
    if retry.not_before is None:
        return _wait(Reason.BACKING_OFF, retry.message)
    if work.now >= retry.not_before:
        return None
    when = retry.not_before.replace(microsecond=0).isoformat()
    return _wait(Reason.BACKING_OFF, f"{retry.message}; attempt {retry.attempt} not before {when}")


def _attempt(work: Work, kind: RunKind) -> int:
    retry = work.retries.get(kind)
    return retry.attempt if retry else 0


def _in_windows(policy: CompactionPolicy, now: datetime) -> bool:
    windows = policy.spec.maintenance_windows
    if not windows:
        return True
    local = now.astimezone(zone(policy.spec.time_zone))
    return any(
        parse_window(f"{w.start}-{w.end}", [d.value for d in w.days]).contains(local)
        for w in windows
    )


def _slot(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


def _schedule_due(
    policy: CompactionPolicy, last: RunRecord | None, now: datetime
) -> datetime | None:
    schedule = policy.spec.triggers.schedule
    if not schedule:
        return None
    tz = zone(policy.spec.time_zone)
    local_now = now.astimezone(tz)
    since = last.start_time if last and last.start_time else now - STARTING_DEADLINE
    return parse_cron(schedule).last_at_or_before(local_now, since.astimezone(tz))


def _threshold(policy: CompactionPolicy, health: TableHealth, last: RunRecord | None) -> str | None:
    t = policy.spec.triggers
    if t.small_files is not None and health.small_files >= t.small_files:
        return f"{health.small_files} small files >= {t.small_files}"
    if t.small_file_percent is not None and health.small_file_percent >= t.small_file_percent:
        return f"{health.small_file_percent:.0f}% small files >= {t.small_file_percent}%"
    if t.commits_since_last_run is not None:
        base = last.version if last and last.version is not None else -1
        commits = health.version - base
        if commits >= t.commits_since_last_run:
            return f"{commits} commits since the last compaction >= {t.commits_since_last_run}"
    return None


def decide_compaction(
    table: TxnTable,
    policy: CompactionPolicy,
    health: TableHealth,
    work: Work,
) -> Decision:
    """Whether to start OPTIMIZE on ``table`` under ``policy`` now."""
    now, active = work.now, work.active
    last = table.status.last_compaction
    if table.spec.suspend:
        return _wait(Reason.TABLE_SUSPENDED, "the table is suspended (spec.suspend)")
    if policy.spec.suspend:
        return _wait(Reason.POLICY_SUSPENDED, f"policy {policy.metadata.name} is suspended")
    if not health.writable:
        return _wait(Reason.UNSUPPORTED_PROTOCOL, f"never compacted: {health.unwritable_reason}")
    vacuuming = [r.name for r in active if r.kind == RunKind.VACUUM]
    if vacuuming:  # short, and stopping it would only waste it: even Replace waits
        return _wait(Reason.RUN_IN_PROGRESS, f"vacuum {', '.join(vacuuming)} is still running")
    mine = [r for r in active if r.kind == RunKind.OPTIMIZE]
    replacing: tuple[str, ...] = ()
    if mine:
        if policy.spec.concurrency_policy is ConcurrencyPolicy.FORBID:
            names = ", ".join(r.name for r in mine)
            return _wait(Reason.RUN_IN_PROGRESS, f"compaction {names} is still running")
        replacing = tuple(r.name for r in mine)
    if health.compactable_small_files < policy.spec.min_input_files:
        return _wait(
            Reason.NOTHING_TO_DO,
            f"{health.compactable_small_files} small files share a partition with another "
            f"(under {policy.spec.min_file_size} bytes); a bin needs {policy.spec.min_input_files}",
        )
    if not _in_windows(policy, now):
        return _wait(Reason.OUTSIDE_MAINTENANCE_WINDOW, "outside the policy's maintenance windows")
    held = _backing_off(work, RunKind.OPTIMIZE)
    if held is not None:
        return held
    hold = work.conflicts
    if hold is not None and now < hold.not_before:
        when = hold.not_before.replace(microsecond=0).isoformat()
        return _wait(Reason.CONFLICT_BACK_OFF, f"{hold.message}; not before {when}")
    attempt = _attempt(work, RunKind.OPTIMIZE)
    try:
        due = _schedule_due(policy, last, now)
    except ScheduleError as exc:
        return _wait(Reason.INVALID_SPEC, f"policy {policy.metadata.name}: {exc}")
    if due is not None:
        launch = Decision(
            True,
            Reason.TRIGGERED,
            f"schedule fired at {due.isoformat()}",
            due,
            "schedule",
            replacing,
            attempt=attempt,
        )
    else:
        cooldown = timedelta(seconds=policy.spec.triggers.cooldown)
        finished = last.completion_time or last.start_time if last else None
        reason = _threshold(policy, health, last)
        if reason is None:
            return _wait(
                Reason.NOT_DUE, "no trigger fired (schedule not due, thresholds not reached)"
            )
        if finished is not None and now - finished < cooldown:
            return _wait(
                Reason.COOLDOWN, f"{reason}, but the last run ended less than {cooldown} ago"
            )
        launch = Decision(
            True, Reason.TRIGGERED, reason, _slot(now), "threshold", replacing, attempt=attempt
        )
    approved = _approved(table, policy, work, launch)
    if approved.launch:  # only a due, approved run waits for a slot (never a table at rest)
        return _slot_free(work, approved, len(replacing)) or approved
    return approved


def _slot_free(work: Work, due: Decision, replaced: int = 0) -> Decision | None:
    """The wait of the ``due`` run for a free run slot when the operator-wide limit is reached
    (``replaced``: runs the new one replaces), None when one is free. Checked last, for a run
    that is due: a table with nothing due never reports the limit, so its status does not flip
    with other tables' runs. The message names the limit, not the runs in flight, so it stays
    the same while the table waits."""
    if work.active_total - replaced < work.max_concurrent_runs:
        return None
    return _wait(
        Reason.CONCURRENCY_LIMIT,
        f"{due.message}; waiting for a run slot (the operator runs at most "
        f"{work.max_concurrent_runs} at once)",
    )


def _approved(table: TxnTable, policy: CompactionPolicy, work: Work, launch: Decision) -> Decision:
    """``launch`` (marked ``approval``), unless the policy requires approval and the table's
    annotation ``txntable.io/approve-plan`` does not name the current plan (an earlier plan's
    id does not approve a changed one) or names one an earlier run was started with."""
    if not policy.spec.require_approval:
        return launch
    given = table.metadata.annotations.get(ANNOTATION_APPROVE_PLAN)
    wanted = work.plan_id
    if wanted is not None and given == wanted and given != work.spent_approval:
        return replace(launch, approval=given)
    if wanted is None:
        return _wait(
            Reason.AWAITING_APPROVAL,
            f"{launch.message}; the policy requires approval and no plan is known yet",
        )
    if given is not None and given == work.spent_approval:
        earlier = f" ({ANNOTATION_APPROVE_PLAN}={given} was spent on an earlier run)"
    elif given:
        earlier = f" ({ANNOTATION_APPROVE_PLAN}={given} approved an earlier plan)"
    else:
        earlier = ""
    return _wait(
        Reason.AWAITING_APPROVAL,
        f"{launch.message}; plan {wanted} awaits approval: annotate the TxnTable with "
        f"{ANNOTATION_APPROVE_PLAN}={wanted}{earlier}",
    )


def decide_vacuum(
    table: TxnTable,
    policy: CompactionPolicy,
    health: TableHealth,
    work: Work,
    compaction: Decision | None = None,
) -> Decision:
    """Whether to start a VACUUM-only run on ``table`` now (``compaction``: this tick's
    compaction decision; a compaction run that starts now vacuums at its end). The last VACUUM
    is ``table.status.last_vacuum_time``."""
    now, active = work.now, work.active
    vac = policy.spec.vacuum
    if not vac.enabled:
        return _wait(
            Reason.DISABLED, f"policy {policy.metadata.name} does not vacuum (spec.vacuum)"
        )
    if table.spec.suspend:
        return _wait(Reason.TABLE_SUSPENDED, "the table is suspended (spec.suspend)")
    if policy.spec.suspend:
        return _wait(Reason.POLICY_SUSPENDED, f"policy {policy.metadata.name} is suspended")
    if not health.maintainable:
        return _wait(Reason.UNSUPPORTED_PROTOCOL, f"never vacuumed: {health.unmaintainable_reason}")
    if compaction is not None and compaction.launch:
        return _wait(Reason.NOT_DUE, "the compaction run starting now ends with VACUUM")
    mine = [r for r in active if r.kind in (RunKind.OPTIMIZE, RunKind.VACUUM)]
    if mine:
        names = ", ".join(f"{r.kind.noun if r.kind else 'run'} {r.name}" for r in mine)
        return _wait(Reason.RUN_IN_PROGRESS, f"{names} is still running")
    reclaimable = health.reclaimable_bytes
    if reclaimable < vac.min_reclaimable_bytes:
        return _wait(
            Reason.NOTHING_TO_DO,
            f"{reclaimable} bytes reclaimable (minReclaimableBytes {vac.min_reclaimable_bytes})",
        )
    last = table.status.last_vacuum_time
    if last is not None and _swept(policy, health, last):
        return _wait(
            Reason.NOTHING_TO_DO,
            f"{reclaimable} bytes of removed files are still in the log, but every one was past "
            f"the retention when the last VACUUM started ({last.isoformat()})",
        )
    if not _in_windows(policy, now):
        return _wait(Reason.OUTSIDE_MAINTENANCE_WINDOW, "outside the policy's maintenance windows")
    held = _backing_off(work, RunKind.VACUUM)
    if held is not None:
        return held
    interval = timedelta(seconds=vac.interval)
    if last is not None and now - last < interval:
        when = (last + interval).replace(microsecond=0).isoformat()
        return _wait(
            Reason.NOT_DUE,
            f"{reclaimable} bytes reclaimable, but the last VACUUM ended less than {interval} "
            f"ago; not before {when}",
        )
    since = "never vacuumed" if last is None else f"last VACUUM {now - last} ago"
    launch = Decision(
        True,
        Reason.TRIGGERED,
        f"{reclaimable} bytes reclaimable >= {vac.min_reclaimable_bytes}, {since}",
        _slot(now),
        "reclaimable",
        attempt=_attempt(work, RunKind.VACUUM),
    )
    return _slot_free(work, launch) or launch


def _swept(policy: CompactionPolicy, health: TableHealth, last: datetime) -> bool:
    """Whether the VACUUM that started at ``last`` already found every tombstone in the log past
    its retention (the longer of the table's and the policy's): then it deleted their files and
    nothing became reclaimable since. Unknown figures say no."""
    newest = health.newest_removal_ms
    cutoff = swept_before(health.file_retention_ms, policy.spec.vacuum.retention, last)
    return newest is not None and cutoff is not None and newest < cutoff


def decide_checkpoint(
    table: TxnTable,
    policy: CheckpointPolicy,
    health: TableHealth,
    work: Work,
) -> Decision:
    """Whether to write a checkpoint of ``table`` under ``policy`` now, and where."""
    now, active = work.now, work.active
    if table.spec.suspend:
        return _wait(Reason.TABLE_SUSPENDED, "the table is suspended (spec.suspend)")
    if policy.spec.suspend:
        return _wait(Reason.POLICY_SUSPENDED, f"policy {policy.metadata.name} is suspended")
    if not health.maintainable:
        return _wait(
            Reason.UNSUPPORTED_PROTOCOL,
            f"no checkpoints written: {health.unmaintainable_reason}",
        )
    mine = [r for r in active if r.kind == RunKind.CHECKPOINT]
    if mine:
        return _wait(Reason.RUN_IN_PROGRESS, f"checkpoint {mine[0].name} is still running")
    held = _backing_off(work, RunKind.CHECKPOINT)
    if held is not None:
        return held
    since = health.commits_since_checkpoint
    reason = None
    if since >= policy.spec.commit_interval:
        reason = f"{since} commits since the last checkpoint >= {policy.spec.commit_interval}"
    elif policy.spec.max_age is not None and since > 0:
        reference = health.checkpoint_time or health.last_commit_time
        age = now - reference
        if health.checkpoint_time is None or age > timedelta(seconds=policy.spec.max_age):
            reason = (
                f"last checkpoint is {int(age.total_seconds())}s old with {since} commits after it"
            )
    if reason is None:
        return _wait(Reason.NOT_DUE, f"{since} commits since the last checkpoint")
    placement = _placement(policy, health)
    launch = Decision(
        True,
        Reason.TRIGGERED,
        reason,
        _slot(now),
        "interval",
        (),
        placement,
        attempt=_attempt(work, RunKind.CHECKPOINT),
    )
    if placement is Placement.SPARK:
        return _slot_free(work, launch) or launch
    return launch


def _placement(policy: CheckpointPolicy, health: TableHealth) -> Placement:
    mode = policy.spec.mode
    if mode is CheckpointMode.INLINE:
        return Placement.INLINE
    if mode is CheckpointMode.SPARK:
        return Placement.SPARK
    return Placement.INLINE if health.files <= policy.spec.inline_max_actions else Placement.SPARK


def outcome_of(result: dict[str, object] | None, succeeded: bool) -> RunOutcome:
    """A run's outcome from its final JSON line (when known) and its exit state."""
    if not succeeded:
        return RunOutcome.FAILED
    if result is None:
        return RunOutcome.SUCCEEDED
    if result.get("vacuumOnly"):
        vacuumed = result.get("vacuum")
        if isinstance(vacuumed, Mapping) and vacuumed.get("numFiles") == 0:
            return RunOutcome.NOTHING_TO_DO
        return RunOutcome.SUCCEEDED
    if result.get("binsSkipped") and not result.get("binsCommitted"):
        return RunOutcome.CONFLICTED
    if result.get("numFilesRemoved") == 0 and result.get("numFilesAdded") == 0:
        return RunOutcome.NOTHING_TO_DO
    return RunOutcome.SUCCEEDED


def vacuumed(
    kind: RunKind | None,
    result: Mapping[str, object] | None,
    succeeded: bool,
    *,
    compaction_vacuums: bool = False,
) -> bool:
    """Whether a finished run VACUUMed the table (dry runs count: they decide the same way):
    a succeeded VACUUM-only run, or any run whose result line carries a VACUUM without error.
    Without a result line (cluster backends read none from a listing) a succeeded compaction
    run counts when its policy vacuums now (``compaction_vacuums``): a VACUUM that fails fails
    the run."""
    if not succeeded:
        return False
    if result is None:
        return kind == RunKind.VACUUM or (kind == RunKind.OPTIMIZE and compaction_vacuums)
    doc = result.get("vacuum")
    return isinstance(doc, Mapping) and not doc.get("error")
