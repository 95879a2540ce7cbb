"""The status of a CompactionPolicy or CheckpointPolicy: what it selects and when it runs next.

Pure: given the policy, the tables of its namespace (with their last runs, from their statuses),
the other policies of its kind there and the clock, return the next ``PolicyStatus``. A table is
matched when ``resolve`` gives it this policy among all of them: one that names another policy,
or that a second policy selects too (a conflict ``resolve`` never breaks: the table follows
neither and says ``PolicyConflict``), is not listed; the Ready message counts the conflicts.
A schedule the controller cannot evaluate (a date that never occurs, ``0 0 30 2 *``; the CRD
refuses what a rule can see) makes the policy Invalid, with the reason on its status.
Which policy governs each table is remembered across ticks (``GOVERNING``, a memo of ``resolve``
by what decides it), so a tick costs O(tables), not O(tables x policies).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from txntable.reconcile.resolve import GoverningPolicies
from txntable.reconcile.schedule import ScheduleError, parse_cron, zone

#: which policy governs each table, shared by every policy's tick (``GoverningPolicies``)
GOVERNING = GoverningPolicies()


def policy_status(
    policy: CompactionPolicy | CheckpointPolicy,
    tables: list[TxnTable],
    now: datetime,
    rivals: Sequence[CompactionPolicy | CheckpointPolicy] = (),
) -> PolicyStatus:
    """The next status of ``policy``; ``rivals``: the policies of its kind in its namespace
    (itself among them or not), which decide between policies selecting one table."""
    kind = "compaction" if isinstance(policy, CompactionPolicy) else "checkpoint"
    same = CompactionPolicy if kind == "compaction" else CheckpointPolicy
    field = [p for p in rivals if p.metadata.name != policy.metadata.name and isinstance(p, same)]
    governing = GOVERNING.governing([policy, *field], kind)
    alone = GOVERNING.governing([policy], kind)
    name = policy.metadata.name
    matched = sorted(t.metadata.name for t in tables if governing(t) == name)
    contested = sum(1 for t in tables if alone(t) == name and t.metadata.name not in matched)
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
    next_time, broken = None, None
    if isinstance(policy, CompactionPolicy) and policy.spec.triggers.schedule:
        try:
            tz = zone(policy.spec.time_zone)
            next_time = parse_cron(policy.spec.triggers.schedule).next_after(now.astimezone(tz))
        except ScheduleError as exc:
            broken = f"spec.triggers.schedule: {exc}; no table of this policy is compacted"
    gen = policy.metadata.generation
    said = f"selects {len(matched)} table(s)"
    if contested:
        said += (
            f"; {contested} more it selects are selected by another {kind} policy too and "
            "follow neither (PolicyConflict on the table: name one in its spec)"
        )
    if broken is not None:
        phase, ok, reason, message = PolicyPhase.INVALID, False, Reason.INVALID_SPEC, broken
    elif policy.spec.suspend:
        phase, ok, reason, message = (
            PolicyPhase.SUSPENDED,
            False,
            Reason.SUSPENDED,
            f"{said}, suspended",
        )
    else:
        phase, ok, reason, message = PolicyPhase.ACTIVE, True, Reason.SPEC_ACCEPTED, said
    conds = set_condition(
        policy.status.conditions,
        ConditionType.READY,
        ok,
        reason,
        message,
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
