"""The status of a CompactionPolicy or CheckpointPolicy: what it selects and when it runs next.

Pure: given the policy, the tables of its namespace (with their last runs, from their statuses)
and the clock, return the next ``PolicyStatus``. Tables that name another policy explicitly are
not counted as matched, mirroring ``resolve``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from txntable.api.conditions import ConditionType, Reason, set_condition
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    PolicyPhase,
    PolicyStatus,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.reconcile.resolve import resolve
from txntable.reconcile.schedule import parse_cron, zone


def policy_status(
    policy: CompactionPolicy | CheckpointPolicy, tables: list[TxnTable], now: datetime
) -> PolicyStatus:
    """The next status of ``policy``."""
    kind = "compaction" if isinstance(policy, CompactionPolicy) else "checkpoint"
    matched = sorted(t.metadata.name for t in tables if _selects(policy, t))
    records: list[RunRecord] = []
    vacuuming: list[RunRecord] = []  # VACUUM-only runs: active runs of the policy, not schedules
    for t in tables:
        if t.metadata.name not in matched:
            continue
        record = t.status.last_compaction if kind == "compaction" else t.status.last_checkpoint
        if record is not None:
            records.append(record)
        if kind == "compaction" and t.status.last_vacuum is not None:
            vacuuming.append(t.status.last_vacuum)
    active = tuple(r for r in (*records, *vacuuming) if r.outcome == RunOutcome.RUNNING)
    finished = [r for r in records if r.outcome != RunOutcome.RUNNING and r.start_time]
    last = max(finished, key=lambda r: r.start_time or now, default=policy.status.last_run)
    next_time = None
    if isinstance(policy, CompactionPolicy) and policy.spec.triggers.schedule:
        tz = zone(policy.spec.time_zone)
        next_time = parse_cron(policy.spec.triggers.schedule).next_after(now.astimezone(tz))
    phase = PolicyPhase.SUSPENDED if policy.spec.suspend else PolicyPhase.ACTIVE
    gen = policy.metadata.generation
    conds = set_condition(
        policy.status.conditions,
        ConditionType.READY,
        not policy.spec.suspend,
        Reason.SUSPENDED if policy.spec.suspend else Reason.SPEC_ACCEPTED,
        f"selects {len(matched)} table(s)" + (", suspended" if policy.spec.suspend else ""),
        observed_generation=gen,
        now=now,
    )
    return replace(
        policy.status,
        observed_generation=gen,
        phase=phase,
        conditions=conds,
        matched_tables=tuple(matched[:1000]),
        matched_table_count=len(matched),
        active_runs=active,
        last_run=last,
        last_schedule_time=last.start_time if last else None,
        next_schedule_time=next_time.replace(second=0, microsecond=0) if next_time else None,
    )


def _selects(policy: CompactionPolicy | CheckpointPolicy, table: TxnTable) -> bool:
    """Whether ``table`` resolves to ``policy`` (ignoring other policies it may conflict with)."""
    if isinstance(policy, CompactionPolicy):
        return resolve(table, [policy], "compaction").policy is policy
    return resolve(table, [policy], "checkpoint").policy is policy
