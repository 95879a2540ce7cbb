"""The next status of a TxnTable, from what was observed and decided in one reconcile.

Conditions follow Kubernetes conventions (api.conditions keeps ``lastTransitionTime`` still
unless the status flips), the phase is a short summary for printer columns, and the result is
compared with the current status by the caller so that nothing is written when nothing changed.

The phase and the Ready condition are decided together, in one place (``verdict``), and every
combination it can give is a row of ``PHASES`` (the table docs/operations.md shows, checked by
a test): the phase says what the controller is doing (a run in flight) or, otherwise, how the
table stands; Ready says whether it is observed *and maintained*, with the reason an on-call
engineer acts on. ``verdict`` refuses a combination outside the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from txntable.api.conditions import ConditionType, Reason, set_condition, spec_accepted
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    ConflictStatus,
    PlanStatus,
    RunKind,
    RunOutcome,
    RunRecord,
    TablePhase,
    TableProtocol,
    TxnTable,
    TxnTableStatus,
)
from txntable.reconcile.decide import ActiveRun, Decision
from txntable.reconcile.health import TableHealth
from txntable.reconcile.resolve import Resolution


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a table could not be observed."""

    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one reconcile learned about a table."""

    now: datetime
    health: TableHealth | None
    failure: Failure | None
    compaction: Resolution[CompactionPolicy]
    checkpoint: Resolution[CheckpointPolicy]
    compaction_decision: Decision | None
    checkpoint_decision: Decision | None
    active: tuple[ActiveRun, ...]
    last_compaction: RunRecord | None
    last_checkpoint: RunRecord | None
    vacuum_decision: Decision | None = None
    last_vacuum: RunRecord | None = None
    last_vacuum_time: datetime | None = None
    #: the next compaction run's plan (``reconcile.plan``) and our runs' conflicts
    plan: PlanStatus | None = None
    conflicts: ConflictStatus | None = None
    #: runs in flight that retry failed ones (what they follow), from the run names
    retrying: tuple[str, ...] = ()
    #: the plan approval a run was started with (``status.spentApproval``)
    spent_approval: str | None = None


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """One combination of phase and Ready the controller writes, with the reasons Ready may
    give in it and when it happens (docs/operations.md shows these rows)."""

    phase: TablePhase
    ready: bool
    reasons: tuple[Reason, ...]
    when: str


#: Why a table's log could not be read (``Failure.reason``).
UNREACHABLE: Final = (
    Reason.TABLE_NOT_FOUND,
    Reason.STORAGE_UNREACHABLE,
    Reason.SECRET_NOT_FOUND,
    Reason.SECRET_UNREADABLE,
    Reason.CORRUPT_LOG,
    Reason.UNSUPPORTED_PROTOCOL,
)
#: Why a readable table is not maintained as its policies say (phase Degraded), in the order
#: they are looked for.
DEGRADED: Final = (
    Reason.POLICY_NOT_FOUND,
    Reason.POLICY_CONFLICT,
    Reason.UNSUPPORTED_PROTOCOL,
    Reason.INVALID_SPEC,
    Reason.RUN_REJECTED,
    Reason.UNSUPPORTED_TABLE_FEATURE,
    Reason.RUN_FAILED,
)
SUSPENDED: Final = (Reason.TABLE_SUSPENDED, Reason.POLICY_SUSPENDED)

#: Every (phase, Ready, reason) the controller writes on a TxnTable.
PHASES: Final[tuple[PhaseRow, ...]] = (
    PhaseRow(TablePhase.INVALID, False, (Reason.INVALID_SPEC,),
             "the spec does not validate; nothing runs until it is fixed"),
    PhaseRow(TablePhase.UNREACHABLE, False, UNREACHABLE,
             "the log cannot be read: no table at the location, storage or its Secret "
             "unreachable, a corrupt log, a reader protocol this engine cannot read"),
    PhaseRow(TablePhase.SUSPENDED, False, SUSPENDED,
             "spec.suspend, or every policy that applies is suspended: observed, not maintained"),
    PhaseRow(TablePhase.COMPACTING, True, (Reason.TABLE_HEALTHY,),
             "a compaction run is in flight (or starts now)"),
    PhaseRow(TablePhase.CHECKPOINTING, True, (Reason.TABLE_HEALTHY,),
             "a checkpoint run is in flight (or is written now), no compaction is"),
    PhaseRow(TablePhase.COMPACTING, False, DEGRADED,
             "a compaction run is in flight while a reason of Degraded holds, e.g. RunFailed "
             "while the run is the retry of failed ones"),
    PhaseRow(TablePhase.CHECKPOINTING, False, DEGRADED,
             "a checkpoint run is in flight while a reason of Degraded holds"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.POLICY_NOT_FOUND, Reason.POLICY_CONFLICT),
             "the policy the table names does not exist, or two policies select it"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.UNSUPPORTED_PROTOCOL,),
             "the table has a feature txntable does not know (observed only), or one OPTIMIZE "
             "cannot honour while a compaction policy applies (checkpoints, cleanup and VACUUM "
             "go on)"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.INVALID_SPEC,),
             "the policy the table names does not validate, or the one that applies cannot be "
             "evaluated (a schedule that never fires)"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.RUN_REJECTED,),
             "a run was refused for good (e.g. the cluster does not serve SparkApplication): "
             "none of its kind starts until the policy or the table changes"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.UNSUPPORTED_TABLE_FEATURE,),
             "one maintenance step cannot work on this table (e.g. checkpoints of a table "
             "feature the writer lacks); the other steps go on"),
    PhaseRow(TablePhase.DEGRADED, False, (Reason.RUN_FAILED,),
             "the last run of a kind failed; its next attempt waits for the back-off (after "
             "an out-of-memory run at the ceiling: for a higher ceiling)"),
    PhaseRow(TablePhase.AWAITING_APPROVAL, True, (Reason.AWAITING_APPROVAL,),
             "a due compaction waits for its plan to be approved (txntable.io/approve-plan)"),
    PhaseRow(TablePhase.READY, True, (Reason.TABLE_HEALTHY,),
             "observed and maintained: nothing is due, or what is due waits for its schedule, "
             "window, cooldown or a free run slot (the Compacting, Vacuuming and "
             "Checkpointing conditions say which)"),
)  # fmt: skip


class StatusTableError(AssertionError):
    """``verdict`` computed a (phase, Ready, reason) that ``PHASES`` does not list: a bug."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The phase, and the Ready condition's status, reason and message."""

    phase: TablePhase
    ready: bool
    reason: Reason
    message: str


def verdict(table: TxnTable, out: Outcome) -> Verdict:
    """The phase and Ready of ``table`` after ``out``: the only place they are decided.
    Raises ``StatusTableError`` for a combination ``PHASES`` does not list."""
    ready, reason, message = _readiness(table, out)
    if out.failure is not None:
        phase = TablePhase.UNREACHABLE
    elif reason in SUSPENDED:
        phase = TablePhase.SUSPENDED
    elif _active(out, RunKind.OPTIMIZE) or _launches(out.compaction_decision):
        phase = TablePhase.COMPACTING
    elif _active(out, RunKind.CHECKPOINT) or _launches(out.checkpoint_decision):
        phase = TablePhase.CHECKPOINTING
    elif not ready:
        phase = TablePhase.DEGRADED
    elif reason is Reason.AWAITING_APPROVAL:
        phase = TablePhase.AWAITING_APPROVAL
    else:
        phase = TablePhase.READY
    if not any(r.phase is phase and r.ready is ready and reason in r.reasons for r in PHASES):
        raise StatusTableError(f"({phase}, Ready={ready}, {reason}) is not a row of PHASES")
    return Verdict(phase, ready, reason, message)


def _launches(decision: Decision | None) -> bool:
    return decision is not None and decision.launch


def _readiness(table: TxnTable, out: Outcome) -> tuple[bool, Reason, str]:
    """Ready means observed *and maintained*: never while the log cannot be read, the table or
    its policies are suspended, a policy does not resolve or cannot be evaluated, the protocol
    refuses the maintenance asked for (all of it, or OPTIMIZE under a compaction policy), a run
    was refused, a step cannot work on the table, or a run failed (until one of its kind
    succeeds: also while its retry runs)."""
    if out.failure is not None:
        return False, out.failure.reason, out.failure.message
    if table.spec.suspend:
        return False, Reason.TABLE_SUSPENDED, "the table is suspended (spec.suspend)"
    for res in (out.compaction, out.checkpoint):
        if res.reason not in (Reason.POLICY_MATCHED, Reason.NO_POLICY):
            return False, res.reason, res.message
    resolved = [p for p in (out.compaction.policy, out.checkpoint.policy) if p is not None]
    if resolved and all(p.spec.suspend for p in resolved):
        names = ", ".join(p.metadata.name for p in resolved)
        return False, Reason.POLICY_SUSPENDED, f"every policy of the table is suspended ({names})"
    health = out.health
    if health is not None and not health.maintainable:
        return False, Reason.UNSUPPORTED_PROTOCOL, f"observed only: {health.unmaintainable_reason}"
    if health is not None and not health.writable and out.compaction.policy is not None:
        # OPTIMIZE only: checkpoints, cleanup and VACUUM change no row and still run
        return False, Reason.UNSUPPORTED_PROTOCOL, f"never compacted: {health.unwritable_reason}"
    decisions = _decisions(out)
    for why in (Reason.INVALID_SPEC, Reason.RUN_REJECTED, Reason.UNSUPPORTED_TABLE_FEATURE):
        said = [f"{kind.noun}: {d.message}" for kind, d in decisions if d.why is why]
        if said:
            return False, why, "; ".join(said)
    failed = [
        f"{kind.noun} run {record.run_name} failed"
        for kind, record in _records(out)
        if record is not None and record.outcome == RunOutcome.FAILED
    ]
    if failed or out.retrying:
        return False, Reason.RUN_FAILED, "; ".join((*failed, *out.retrying))
    awaiting = out.compaction_decision
    if awaiting is not None and awaiting.why is Reason.AWAITING_APPROVAL:
        return True, Reason.AWAITING_APPROVAL, awaiting.message
    return True, Reason.TABLE_HEALTHY, "observed and maintained"


def _decisions(out: Outcome) -> list[tuple[RunKind, Decision]]:
    pairs = (
        (RunKind.OPTIMIZE, out.compaction_decision),
        (RunKind.VACUUM, out.vacuum_decision),
        (RunKind.CHECKPOINT, out.checkpoint_decision),
    )
    return [(kind, d) for kind, d in pairs if d is not None]


def _records(out: Outcome) -> Sequence[tuple[RunKind, RunRecord | None]]:
    return (
        (RunKind.OPTIMIZE, out.last_compaction),
        (RunKind.VACUUM, out.last_vacuum),
        (RunKind.CHECKPOINT, out.last_checkpoint),
    )


def _policy_message(res: Resolution[Any]) -> tuple[bool, Reason, str]:
    ok = res.reason in (Reason.POLICY_MATCHED, Reason.NO_POLICY)
    return ok, res.reason, res.message


def _run_condition(
    out: Outcome, kind: RunKind, res: Resolution[Any], decision: Decision | None
) -> tuple[bool, Reason, str]:
    active = _active(out, kind)
    if active and active[0].waiting:
        run = active[0]
        return True, Reason.RUN_CANNOT_START, f"{kind.noun} {run.name} cannot start: {run.waiting}"
    if active:
        return True, Reason.RUN_STARTED, f"{kind.noun} {active[0].name} is running"
    if decision is None and out.failure is not None and res.policy is not None:
        return False, out.failure.reason, f"not decided: {out.failure.message}"
    if decision is None:
        return False, Reason.NO_POLICY, f"no {kind.noun} policy applies"
    if decision.launch:
        return True, Reason.RUN_STARTED, decision.message
    return False, decision.why, decision.message


def table_status(table: TxnTable, out: Outcome) -> TxnTableStatus:
    """The status to write for ``table`` after one reconcile: its conditions, the phase that
    sums them up, the policies and runs it follows, and the figures of its log."""
    gen = table.metadata.generation
    current = table.status
    judged = verdict(table, out)
    conds = spec_accepted(current.conditions, observed_generation=gen, now=out.now)
    for type_, ok, reason, message in _conditions(out, judged):
        conds = set_condition(
            conds, type_, ok, reason, message, observed_generation=gen, now=out.now
        )
    status = replace(
        current,
        observed_generation=gen,
        conditions=conds,
        phase=judged.phase,
        compaction_policy=out.compaction.policy.metadata.name if out.compaction.policy else None,
        checkpoint_policy=out.checkpoint.policy.metadata.name if out.checkpoint.policy else None,
        last_compaction=out.last_compaction,
        last_checkpoint=out.last_checkpoint,
        last_vacuum=out.last_vacuum or current.last_vacuum,
        last_vacuum_time=_latest(current.last_vacuum_time, out.last_vacuum_time),
        plan=out.plan,
        conflicts=out.conflicts,
        spent_approval=out.spent_approval or current.spent_approval,
    )
    return _with_health(status, out.health) if out.health is not None else status


def _conditions(out: Outcome, judged: Verdict) -> list[tuple[ConditionType, bool, Reason, str]]:
    """(type, ok, reason, message) of each condition txntable writes, in their order. Degraded
    is Ready=False for a reason other than suspension, with Ready's reason and message."""
    if out.failure is not None:
        reachable = (False, out.failure.reason, out.failure.message)
    else:
        reachable = (True, Reason.AS_EXPECTED, "the table's log was read")
    (ok_c, reason_c, msg_c), (ok_k, reason_k, msg_k) = (
        _policy_message(out.compaction),
        _policy_message(out.checkpoint),
    )
    degraded = not judged.ready and judged.reason not in SUSPENDED
    return [
        (ConditionType.REACHABLE, *reachable),
        (
            ConditionType.POLICY_RESOLVED,
            ok_c and ok_k,
            reason_c if not ok_c else reason_k,
            f"{msg_c}; {msg_k}",
        ),
        (
            ConditionType.COMPACTING,
            *_run_condition(out, RunKind.OPTIMIZE, out.compaction, out.compaction_decision),
        ),
        (
            ConditionType.VACUUMING,
            *_run_condition(out, RunKind.VACUUM, out.compaction, out.vacuum_decision),
        ),
        (
            ConditionType.CHECKPOINTING,
            *_run_condition(out, RunKind.CHECKPOINT, out.checkpoint, out.checkpoint_decision),
        ),
        (
            ConditionType.DEGRADED,
            degraded,
            judged.reason if degraded else Reason.AS_EXPECTED,
            judged.message if degraded else "no problem observed",
        ),
        (ConditionType.READY, judged.ready, judged.reason, judged.message),
    ]


def _active(out: Outcome, kind: RunKind) -> list[ActiveRun]:
    return [r for r in out.active if r.kind == kind]


def _with_health(status: TxnTableStatus, health: TableHealth) -> TxnTableStatus:
    """``status`` with the figures of the table's log observed this time."""
    return replace(
        status,
        version=health.version,
        protocol=TableProtocol(
            min_reader_version=health.min_reader_version,
            min_writer_version=health.min_writer_version,
            reader_features=health.reader_features,
            writer_features=health.writer_features,
        ),
        files=health.files,
        size_bytes=health.size_bytes,
        small_files=health.small_files,
        files_with_deletion_vectors=health.files_with_deletion_vectors,
        deleted_rows=health.deleted_rows,
        reclaimable_bytes=health.reclaimable_bytes,
        partitions=health.partitions,
        commits_since_checkpoint=health.commits_since_checkpoint,
        last_commit_time=health.last_commit_time.replace(microsecond=0),
        last_checkpoint_version=health.checkpoint_version,
    )


def _latest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def invalid_spec_status(generation: int | None, message: str, now: datetime) -> dict[str, Any]:
    """The status fields of a resource whose spec does not validate (the rest of its status
    stays): SpecValid and Ready False with the reason, phase Invalid."""
    conds = set_condition(
        (),
        ConditionType.SPEC_VALID,
        False,
        Reason.INVALID_SPEC,
        message,
        observed_generation=generation,
        now=now,
    )
    conds = set_condition(
        conds,
        ConditionType.READY,
        False,
        Reason.INVALID_SPEC,
        message,
        observed_generation=generation,
        now=now,
    )
    return {
        "observedGeneration": generation,
        "phase": TablePhase.INVALID.value,
        "conditions": [c.to_dict() for c in conds],
    }
