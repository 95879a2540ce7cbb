"""The next status of a TxnTable, from what was observed and decided in one reconcile.

Conditions follow Kubernetes conventions (api.conditions keeps ``lastTransitionTime`` still
unless the status flips), the phase is a short summary for printer columns, and the result is
compared with the current status by the caller so that nothing is written when nothing changed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from txntable.api.conditions import ConditionType, Reason, set_condition
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

#: Commits past the checkpoint interval (as a multiple) that count as checkpoint lag.
LAG_FACTOR = 2
#: Share of small files that counts as a small-file backlog.
BACKLOG_PERCENT = 50.0


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


def _policy_message(res: Resolution[Any]) -> tuple[bool, Reason, str]:
    ok = res.reason in (Reason.POLICY_MATCHED, Reason.NO_POLICY)
    return ok, res.reason, res.message


def _run_condition(
    out: Outcome, kind: RunKind, decision: Decision | None
) -> tuple[bool, Reason, str]:
    active = _active(out, kind)
    if active:
        return True, Reason.RUN_STARTED, f"{kind.noun} {active[0].name} is running"
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
    problems = _degradations(out)
    conds = current.conditions
    for type_, ok, reason, message in _conditions(out, problems):
        conds = set_condition(
            conds, type_, ok, reason, message, observed_generation=gen, now=out.now
        )
    status = replace(
        current,
        observed_generation=gen,
        conditions=conds,
        phase=_phase(table, out, problems),
        compaction_policy=out.compaction.policy.metadata.name if out.compaction.policy else None,
        checkpoint_policy=out.checkpoint.policy.metadata.name if out.checkpoint.policy else None,
        last_compaction=out.last_compaction,
        last_checkpoint=out.last_checkpoint,
        last_vacuum=out.last_vacuum or current.last_vacuum,
        last_vacuum_time=_latest(current.last_vacuum_time, out.last_vacuum_time),
        plan=out.plan,
        conflicts=out.conflicts,
    )
    return _with_health(status, out.health) if out.health is not None else status


def _conditions(
    out: Outcome, problems: list[tuple[Reason, str]]
) -> list[tuple[ConditionType, bool, Reason, str]]:
    """(type, ok, reason, message) of each condition txntable writes, in their order."""
    if out.failure is not None:
        reachable = (False, out.failure.reason, out.failure.message)
    else:
        reachable = (True, Reason.AS_EXPECTED, "the table's log was read")
    policies = [_policy_message(out.compaction), _policy_message(out.checkpoint)]
    (ok_c, reason_c, msg_c), (ok_k, reason_k, msg_k) = policies
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
            *_run_condition(out, RunKind.OPTIMIZE, out.compaction_decision),
        ),
        (
            ConditionType.VACUUMING,
            *_run_condition(out, RunKind.VACUUM, out.vacuum_decision),
        ),
        (
            ConditionType.CHECKPOINTING,
            *_run_condition(out, RunKind.CHECKPOINT, out.checkpoint_decision),
        ),
        (
            ConditionType.DEGRADED,
            bool(problems),
            problems[0][0] if problems else Reason.AS_EXPECTED,
            "; ".join(m for _, m in problems) if problems else "no problem observed",
        ),
        (ConditionType.READY, *_readiness(out, problems, policies)),
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


def _readiness(
    out: Outcome, problems: list[tuple[Reason, str]], policies: list[tuple[bool, Reason, str]]
) -> tuple[bool, Reason, str]:
    """Ready means observed *and maintained*: never while the log cannot be read, a policy does
    not resolve, the table cannot be written, or its last maintenance run failed, so Ready and
    the phase never contradict each other."""
    if out.failure is not None:
        return False, out.failure.reason, out.failure.message
    for ok, reason, message in policies:
        if not ok:
            return False, reason, message
    blocking = (Reason.UNSUPPORTED_PROTOCOL, Reason.RUN_FAILED)
    for reason, message in problems:
        if reason in blocking:
            return False, reason, message
    return True, Reason.TABLE_HEALTHY, "observed and maintained"


def _degradations(out: Outcome) -> list[tuple[Reason, str]]:
    problems: list[tuple[Reason, str]] = []
    health = out.health
    if out.failure is not None:
        problems.append((out.failure.reason, out.failure.message))
    if health is not None:
        problems.extend(_refused_steps(out, health))
    if (
        health is not None
        and health.compactable_small_files
        and 100.0 * health.compactable_small_files / health.files >= BACKLOG_PERCENT
    ):
        problems.append(
            (
                Reason.SMALL_FILE_BACKLOG,
                f"{health.compactable_small_files} of {health.files} files are small "
                "and could be compacted",
            )
        )
    policy = out.checkpoint.policy
    if health is not None and policy is not None:
        limit = LAG_FACTOR * policy.spec.commit_interval
        if health.commits_since_checkpoint > limit:
            problems.append(
                (
                    Reason.CHECKPOINT_LAG,
                    f"{health.commits_since_checkpoint} commits since the last checkpoint",
                )
            )
    for record in (out.last_compaction, out.last_checkpoint, out.last_vacuum):
        if record is not None and record.outcome == RunOutcome.FAILED:
            problems.append((Reason.RUN_FAILED, f"run {record.run_name} failed"))
    return problems


def _refused_steps(out: Outcome, health: TableHealth) -> list[tuple[Reason, str]]:
    """The maintenance the table's policies ask for and its protocol refuses: nothing at all
    (an unknown feature), or OPTIMIZE only (checkpoints, cleanup and VACUUM change no row and
    honour more features than a rewrite)."""
    if not health.maintainable:
        return [(Reason.UNSUPPORTED_PROTOCOL, f"observed only: {health.unmaintainable_reason}")]
    compaction = out.compaction.policy
    if health.writable or compaction is None:
        return []
    return [(Reason.UNSUPPORTED_PROTOCOL, f"never compacted: {health.unwritable_reason}")]


def _latest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def _phase(table: TxnTable, out: Outcome, problems: list[tuple[Reason, str]]) -> TablePhase:
    resolved = _policy_message(out.compaction)[0] and _policy_message(out.checkpoint)[0]
    compacting = _active(out, RunKind.OPTIMIZE)
    checkpointing = _active(out, RunKind.CHECKPOINT)
    if out.failure is not None:
        return TablePhase.UNREACHABLE
    if table.spec.suspend:
        return TablePhase.SUSPENDED
    if compacting or (out.compaction_decision and out.compaction_decision.launch):
        return TablePhase.COMPACTING
    if checkpointing or (out.checkpoint_decision and out.checkpoint_decision.launch):
        return TablePhase.CHECKPOINTING
    if problems or not resolved:
        return TablePhase.DEGRADED
    return TablePhase.READY
