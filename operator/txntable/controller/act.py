"""Acting on a tick's decisions: decide each step, hold what must not be tried, start the rest.

In a fixed order, so each decision sees the runs started before it (``Acts.work``): the
compaction, then the VACUUM-only run that waits for it, then the checkpoint. Each decision is
the pure function of ``reconcile.decide``; ``controller.holds`` replaces it when a launch of that
kind was refused for good under this policy and table, or the step cannot work on the table's
protocol; a due compaction whose every bin other writers are changing is not launched
(``Foresight.all_deferred``); what is left is started through the one launch path of every kind,
``controller.launching``. The plan approval a compaction started on is spent (``Holds.spend``),
so it is never used twice.

It lives apart from the tick (``controller.tick``) so that the tick reads as its pipeline and
what starts runs reads as one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from txntable.api.conditions import Event
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.controller.foresee import Foresight
from txntable.controller.holds import Holds, protocol_of
from txntable.controller.launching import Launching, refusal_signature
from txntable.controller.observe import Observer
from txntable.controller.runs import Seen
from txntable.engine import Table
from txntable.launch.sizing import Sizing
from txntable.reconcile.decide import (
    ActiveRun,
    Decision,
    Work,
    decide_checkpoint,
    decide_compaction,
    decide_vacuum,
)
from txntable.reconcile.health import TableHealth


@dataclass(slots=True)
class Acts:
    """What one tick decided and started; ``work`` counts the runs started so far, so each
    decision sees those before it."""

    work: Work
    last_compaction: RunRecord | None
    last_checkpoint: RunRecord | None
    last_vacuum: RunRecord | None
    compaction: Decision | None = None
    vacuum: Decision | None = None
    checkpoint: Decision | None = None
    launched: list[str] = field(default_factory=list)
    #: the plan approval a run started with this tick (now spent)
    spent_approval: str | None = None

    def in_flight(self, name: str, kind: RunKind) -> None:
        """Count the run ``name``, launched now, as in flight (toward the concurrency limit,
        and in ``Tick.active_runs``, which the other tables' ticks count)."""
        self.work = replace(
            self.work,
            active=(*self.work.active, ActiveRun(name, kind, self.work.now)),
            active_total=self.work.active_total + 1,
        )
        self.launched.append(name)

    def started(self, table: TxnTable, name: str, kind: RunKind, version: int) -> RunRecord:
        """Count the run ``name`` as in flight; return its record."""
        now = self.work.now
        self.in_flight(name, kind)
        return RunRecord(
            run_name=name,
            table=table.metadata.name,
            outcome=RunOutcome.RUNNING,
            start_time=now.replace(microsecond=0),
            version=version,
        )


@dataclass
class Acting:
    """Decides and starts each step of one tick."""

    launching: Launching
    holds: Holds
    foresight: Foresight
    observer: Observer

    def compact_and_vacuum(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        seen: Seen,
        acts: Acts,
        events: list[Event],
        *,
        sizing: Sizing,
    ) -> None:
        """Decide and start the compaction (sized by ``sizing``, the tick's), then the
        VACUUM-only run that waits for it."""
        health = seen.health
        if health is None or seen.engine_table is None:
            return  # not observed: nothing is decided (the caller does not ask)
        key = table.metadata.key
        decision = self._held(table, policy, RunKind.OPTIMIZE, health, acts.work)
        if decision.launch:
            decision = self.foresight.all_deferred(
                key,
                policy=policy,
                summary=self.observer.summary(key),
                table=seen.engine_table,
                decision=decision,
                now=acts.work.now,
            )
        acts.compaction = decision
        said = self.foresight.announcement(
            key, decision, table.status.conditions, acts.work.plan_id
        )
        if said is not None:
            events.append(Event("Normal", *said))
        if decision.launch:
            started = self.launching.compaction(table, policy, decision, sizing, events)
            if isinstance(started, Decision):
                acts.compaction = decision = started
            else:
                acts.last_compaction = acts.started(
                    table, started, RunKind.OPTIMIZE, health.version
                )
                if decision.approval is not None:
                    self.holds.spend(key, decision.approval)
                    acts.spent_approval = decision.approval
        vacuum = self._held(table, policy, RunKind.VACUUM, health, acts.work, compaction=decision)
        if vacuum.launch:
            started = self.launching.vacuum(table, policy, vacuum, events)
            if isinstance(started, Decision):
                vacuum = started
            else:
                acts.last_vacuum = acts.started(table, started, RunKind.VACUUM, health.version)
        acts.vacuum = vacuum

    def checkpoint(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        health: TableHealth,
        engine_table: Table,
        *,
        acts: Acts,
        events: list[Event],
    ) -> None:
        """Decide and start (or write inline) the checkpoint."""
        decision = self._held(table, policy, RunKind.CHECKPOINT, health, acts.work)
        acts.checkpoint = decision
        if not decision.launch:
            return
        record = self.launching.checkpoint(
            table,
            policy,
            decision,
            engine_table=engine_table,
            events=events,
            now=acts.work.now,
            protocol=protocol_of(health),
        )
        if isinstance(record, Decision):
            acts.checkpoint = record
        elif record is not None and record is not acts.last_checkpoint:
            acts.last_checkpoint = record
            if record.outcome is RunOutcome.RUNNING:  # a Spark run: in flight like the others
                acts.in_flight(record.run_name, RunKind.CHECKPOINT)
            else:  # written inline, in this tick: over already
                acts.launched.append(record.run_name)
            held = self.holds.unsupported_hold(
                table.metadata.key, RunKind.CHECKPOINT, protocol_of(health)
            )
            if held is not None:  # the step cannot work on this table: say so now
                acts.checkpoint = held

    def _held(
        self,
        table: TxnTable,
        policy: CompactionPolicy | CheckpointPolicy,
        kind: RunKind,
        health: TableHealth,
        work: Work,
        *,
        compaction: Decision | None = None,
    ) -> Decision:
        """The decision for ``kind``, held when a launch of it was refused under this policy
        and table (for good, or for want of permission until its retry time), or the step
        cannot work on this table's protocol (``Holds``)."""
        if isinstance(policy, CheckpointPolicy):
            decision = decide_checkpoint(table, policy, health, work)
        elif kind == RunKind.VACUUM:
            decision = decide_vacuum(table, policy, health, work, compaction)
        else:
            decision = decide_compaction(table, policy, health, work)
        return self.holds.hold(
            table.metadata.key,
            kind,
            decision,
            refused_under=refusal_signature(table, policy),
            protocol=protocol_of(health),
            now=work.now,
        )
