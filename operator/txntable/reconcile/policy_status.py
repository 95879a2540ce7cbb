"""The status of a CompactionPolicy or CheckpointPolicy: what it selects and when it runs next.

Pure: given the policy, who governs what among the tables of its namespace (``Governed``, from
the tables with their last runs in their statuses and the policies of its kind there) and the
clock, return the next ``PolicyStatus``. A table is matched when ``resolve`` gives it this policy
among all of them: one that names another policy, or that a second policy selects too (a
conflict ``resolve`` never breaks: the table follows neither and says ``PolicyConflict``), is not
listed; the Ready message counts the conflicts. A schedule the controller cannot evaluate (a date
that never occurs, ``0 0 30 2 *``; the CRD refuses what a rule can see) makes the policy Invalid,
with the reason on its status.

``govern`` answers for every policy of a namespace in one pass over its tables, so the
controller computes it once per change of the namespace's tables or policies and every policy's
tick reads its part (``handlers.governed_views``): a tick that walked every table for itself
made the policies' ticks O(tables x policies) per interval, a tenth of a core at 5,000 tables
and 200 policies (docs/benchmarks.md, scale_apiserver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from txntable.api.conditions import ConditionType, Reason, set_condition, spec_accepted
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    PolicyPhase,
    PolicyStatus,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.reconcile.schedule import ScheduleError, parse_cron, zone

Policy = CompactionPolicy | CheckpointPolicy


@dataclass(frozen=True, slots=True)
class Governed:
    """Who governs what among a namespace's tables, for one kind of policy: by policy name, the
    tables ``resolve`` gives it (sorted by name) and how many more it selects that another
    policy selects too (``resolve`` gives those tables neither)."""

    matched: Mapping[str, tuple[TxnTable, ...]]
    contested: Mapping[str, int]


def govern(tables: Sequence[TxnTable], policies: Sequence[Policy], kind: str) -> Governed:
    """``resolve``'s choice of a ``kind`` policy among ``policies`` for every table, with the
    conflicts counted by policy, in one pass over ``tables``. The choice depends only on a
    table's policy reference and labels, so it is made once per distinct pair."""
    by_name = {p.metadata.name: p for p in policies}
    selecting = [p for p in policies if p.spec.table_selector is not None]
    choices: dict[tuple[str | None, tuple[tuple[str, str], ...]], tuple[str, ...]] = {}
    matched: dict[str, list[TxnTable]] = {}
    contested: dict[str, int] = {}
    for table in tables:
        spec = table.spec
        ref = spec.compaction_policy_ref if kind == "compaction" else spec.checkpoint_policy_ref
        key = (ref.name if ref is not None else None, tuple(sorted(table.metadata.labels.items())))
        chosen = choices.get(key)
        if chosen is None:
            if ref is not None:  # by name: its policy or none, never a conflict
                chosen = (ref.name,) if ref.name in by_name else ()
            else:
                labels = table.metadata.labels
                chosen = tuple(
                    p.metadata.name
                    for p in selecting
                    if p.spec.table_selector is not None and p.spec.table_selector.matches(labels)
                )
            choices[key] = chosen
        if len(chosen) == 1:
            matched.setdefault(chosen[0], []).append(table)
        else:
            for name in chosen:
                contested[name] = contested.get(name, 0) + 1
    return Governed(
        {
            name: tuple(sorted(found, key=lambda t: t.metadata.name))
            for name, found in matched.items()
        },
        contested,
    )


def policy_status(
    policy: Policy,
    tables: Sequence[TxnTable],
    now: datetime,
    rivals: Sequence[Policy] = (),
) -> PolicyStatus:
    """The next status of ``policy``; ``rivals``: the policies of its kind in its namespace
    (itself among them or not), which decide between policies selecting one table."""
    kind = "compaction" if isinstance(policy, CompactionPolicy) else "checkpoint"
    same = CompactionPolicy if kind == "compaction" else CheckpointPolicy
    field = [p for p in rivals if p.metadata.name != policy.metadata.name and isinstance(p, same)]
    return governed_status(policy, govern(tables, [policy, *field], kind), now)


def governed_status(policy: Policy, governed: Governed, now: datetime) -> PolicyStatus:
    """The next status of ``policy`` from who governs what in its namespace (``govern`` over
    its tables and its kind's policies, itself among them)."""
    kind = "compaction" if isinstance(policy, CompactionPolicy) else "checkpoint"
    name = policy.metadata.name
    mine = governed.matched.get(name, ())
    matched = [t.metadata.name for t in mine]
    contested = governed.contested.get(name, 0)
    records: list[RunRecord] = []
    vacuuming: list[RunRecord] = []  # VACUUM-only runs: active runs of the policy, not schedules
    for t in mine:
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
    conds = policy.status.conditions
    if broken is None:  # a schedule that never fires is the spec's fault: SpecValid stays
        conds = spec_accepted(conds, observed_generation=gen, now=now)
    conds = set_condition(
        conds,
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
