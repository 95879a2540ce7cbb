"""Starting runs: what turns a decision to launch into a run, an inline checkpoint or a reason why
not.

``Launching`` builds the run request (``controller.requests``), hands it to the launcher of the
policy's backend and reports the outcome as the run's name (started or adopted, with its
``RunStarted`` Event) or as the decision to show instead: ``RunRejected`` when the launcher
refused it (held, ``controller.holds``: for good while the policy and the table stay as they are;
refused for want of permission, until a back-off that doubles from
``TXNTABLE_PERMISSION_RETRY_SECONDS`` up to 30 times that), ``RunLaunchFailed`` when it failed
now (tried again at the next tick), ``RunInProgress`` when the run already ran (a restart lost
its record). A small checkpoint is written inline, from a snapshot loaded for that checkpoint
only; a table feature the checkpoint writer cannot handle holds the step instead of failing it
again at every back-off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from txntable.api.conditions import Event, EventReason, Reason, format_time
from txntable.api.types import (
    CheckpointPolicy,
    CompactionPolicy,
    RunKind,
    RunOutcome,
    RunRecord,
    TxnTable,
)
from txntable.config import Config
from txntable.controller.holds import Holds, Signature
from txntable.controller.requests import checkpoint_request, compaction_request, vacuum_request
from txntable.engine import (
    EngineError,
    Snapshot,
    Table,
    UnsupportedFeatureError,
    cleanup_expired_logs,
    write_checkpoint,
)
from txntable.launch import Backend, Launcher, RunRequest, RunState, RunStatus
from txntable.launch.errors import LaunchError, PermanentLaunchError
from txntable.launch.sizing import Sizing
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.reconcile.decide import Decision, Placement

log = logging.getLogger(__name__)

#: ``PermanentLaunchError.reason`` of refusals an administrator can lift without touching the
#: policy (the controller's RBAC, its token): tried again after a back-off, not held for good
PERMISSION_REASONS = frozenset({"Forbidden", "Unauthorized"})
#: the longest back-off of a permission refusal, in first back-offs (1 min -> 30 min)
PERMISSION_RETRY_GROWTH = 30


@dataclass
class Launching:
    """What starting runs needs: configuration, launchers, clock, metrics and the holds."""

    config: Config
    launchers: Callable[[Backend], Launcher]
    clock: Callable[[], datetime]
    holds: Holds
    metrics: ControllerMetrics | None = None
    #: whether this replica may still start a run of the table (``handlers.shards``: it holds
    #: the table's shard); asked right before each launch, since a tick can outlive the lease
    permit: Callable[[TxnTable], bool] | None = None

    def refused(
        self,
        table: TxnTable,
        policy: CompactionPolicy | CheckpointPolicy,
        kind: RunKind,
        exc: PermanentLaunchError,
    ) -> Decision:
        """The decision after a launch of ``kind`` was refused: for good (not tried again while
        the policy and the table stay as they are), or for want of permission (401/403: tried
        again after a back-off, as the controller's RBAC may be given back meanwhile)."""
        signature = refusal_signature(table, policy)
        if exc.reason not in PERMISSION_REASONS:
            why = f"{kind.noun} runs are refused: {exc}; fix policy {policy.metadata.name}"
            return self.holds.refuse(table.metadata.key, kind, signature, why)
        first = timedelta(seconds=self.config.permission_retry_seconds)
        most = first * PERMISSION_RETRY_GROWTH

        def message(retry_at: datetime) -> str:
            return (
                f"{kind.noun} runs are refused: {exc}; the controller's RBAC must allow it; "
                f"tried again at {format_time(retry_at)} (back-off doubling up to "
                f"{_duration(most)})"
            )

        return self.holds.refuse_for_now(
            table.metadata.key, kind, signature, message, now=self.clock(), back_off=(first, most)
        )

    def _start(
        self,
        table: TxnTable,
        policy: CompactionPolicy | CheckpointPolicy,
        decision: Decision,
        request: Callable[[], RunRequest],
        events: list[Event],
        *,
        kind: RunKind,
        note: str = "",
    ) -> tuple[str, RunStatus] | Decision:
        """The one launch path of every kind: build the request, replace the runs the decision
        replaces, launch; the run's name (the request's: an API server's answer need not echo
        it) and status, after its ``RunStarted`` Event (``note`` added when it was started
        rather than adopted), or the decision that says why nothing started."""
        if self.permit is not None and not self.permit(table):
            return _launch_failed(kind, LaunchError("this replica no longer holds the table"))
        try:
            req = request()
            launcher = self.launchers(req.backend)
            for old in decision.replace_runs:
                launcher.delete(req.namespace, old)
            status = launcher.launch(req)
        except PermanentLaunchError as exc:
            return self.refused(table, policy, kind, exc)
        except LaunchError as exc:
            return _launch_failed(kind, exc)
        self.holds.launched(table.metadata.key, kind)
        if status.adopted and status.state.finished:
            return _already_ran(kind, req.name, status.state)
        verb = "adopted" if status.adopted else "started"
        said = f"{kind.noun} {req.name} {verb}: {decision.message}"
        said += note if not status.adopted else ""
        events.append(Event("Normal", EventReason.RUN_STARTED, said[:1024]))
        log.info("%s %s %s (%s)", kind.noun, req.name, verb, decision.message)
        return req.name, status

    def compaction(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        decision: Decision,
        sizing: Sizing,
        events: list[Event],
    ) -> str | Decision:
        """Launch the compaction ``decision`` asks for, sized by ``sizing``: the run's name,
        or the decision that says why nothing was launched."""
        started = self._start(
            table,
            policy,
            decision,
            lambda: compaction_request(table, policy, decision, self.config, sizing),
            events,
            kind=RunKind.OPTIMIZE,
            note=f"; {sizing.reason}" if sizing.reason else "",
        )
        return started if isinstance(started, Decision) else started[0]

    def vacuum(
        self,
        table: TxnTable,
        policy: CompactionPolicy,
        decision: Decision,
        events: list[Event],
    ) -> str | Decision:
        """Launch the VACUUM-only run: its name, or the decision that says why not."""
        started = self._start(
            table,
            policy,
            decision,
            lambda: vacuum_request(table, policy, decision, self.config),
            events,
            kind=RunKind.VACUUM,
        )
        return started if isinstance(started, Decision) else started[0]

    def checkpoint(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        decision: Decision,
        *,
        engine_table: Table,
        events: list[Event],
        now: datetime,
        protocol: Signature,
    ) -> RunRecord | Decision:
        """Write the checkpoint inline or launch its run: its record, or the decision that
        says why nothing was launched."""
        if decision.placement is Placement.INLINE:
            return self._inline(
                table,
                policy,
                engine_table,
                events=events,
                now=now,
                attempt=decision.attempt,
                protocol=protocol,
            )
        started = self._start(
            table,
            policy,
            decision,
            lambda: checkpoint_request(table, policy, decision, self.config),
            events,
            kind=RunKind.CHECKPOINT,
        )
        if isinstance(started, Decision):
            return started
        name, status = started
        return RunRecord(
            run_name=name,
            table=table.metadata.name,
            outcome=RunOutcome.RUNNING,
            start_time=_whole(status.started or now),
        )

    def _inline(
        self,
        table: TxnTable,
        policy: CheckpointPolicy,
        engine_table: Table,
        *,
        events: list[Event],
        now: datetime,
        attempt: int = 0,
        protocol: Signature = (),
    ) -> RunRecord:
        """Write a checkpoint (and clean up the log) in this process. A table feature the
        checkpoint writer cannot handle holds the step (``Holds.unsupported``), announced once
        by the status, not as a failed run each back-off."""
        started = time.monotonic()
        # for this checkpoint only, not kept; it holds every statistic, so read them at once
        snapshot = Snapshot.load(engine_table.storage, stats=True)
        name = f"inline-checkpoint-{snapshot.version}" + (f"-r{attempt}" if attempt else "")
        try:
            result = write_checkpoint(snapshot, part_size=policy.spec.part_size)
            cleanup_note = ""
            if policy.spec.log_cleanup.enabled:
                cleaned = cleanup_expired_logs(
                    snapshot, retention_ms=policy.spec.log_cleanup.log_retention * 1000
                )
                cleanup_note = f", {len(cleaned.deleted)} expired log files deleted"
        except EngineError as exc:
            self._finished(table, RunOutcome.FAILED, time.monotonic() - started)
            message = f"inline checkpoint failed: {exc}"
            if isinstance(exc, UnsupportedFeatureError):
                message = f"checkpoints are not written: {exc} (compaction and VACUUM go on)"
                self.holds.unsupported(table.metadata.key, RunKind.CHECKPOINT, protocol, message)
            else:
                events.append(Event("Warning", EventReason.RUN_FAILED, message))
            return RunRecord(
                run_name=name,
                table=table.metadata.name,
                outcome=RunOutcome.FAILED,
                start_time=_whole(now),
                completion_time=_whole(self.clock()),
                version=snapshot.version,
                message=message[:4000],
            )
        seconds = time.monotonic() - started
        self._finished(table, RunOutcome.SUCCEEDED, seconds)
        kept = " (already there: kept)" if result.existing else ""
        message = f"checkpoint at version {result.version}{kept} in {seconds:.2f}s{cleanup_note}"
        events.append(Event("Normal", EventReason.RUN_SUCCEEDED, message))
        return RunRecord(
            run_name=name,
            table=table.metadata.name,
            outcome=RunOutcome.SUCCEEDED,
            start_time=_whole(now),
            completion_time=_whole(self.clock()),
            version=result.version,
            message=message,
        )

    def _finished(self, table: TxnTable, outcome: RunOutcome, seconds: float) -> None:
        if self.metrics is not None:
            ns = table.metadata.namespace or "default"
            self.metrics.run_finished(
                ns, table.metadata.name, RunKind.CHECKPOINT, outcome, seconds=seconds
            )


def _whole(moment: datetime | None) -> datetime | None:
    return moment.replace(microsecond=0) if moment else None


def refusal_signature(table: TxnTable, policy: CompactionPolicy | CheckpointPolicy) -> Signature:
    """What a refused launch depends on: the policy and the table as they are now."""
    meta = policy.metadata
    return (
        meta.name,
        meta.generation if meta.generation is not None else meta.resource_version,
        table.metadata.generation,
    )


def _launch_failed(kind: RunKind, exc: LaunchError) -> Decision:
    """A launch that failed now and is tried again at the next tick."""
    return Decision(False, Reason.RUN_LAUNCH_FAILED, f"{kind.noun} run not started: {exc}")


def _already_ran(kind: RunKind, name: str, state: RunState) -> Decision:
    """A launch that found its run already finished (a restart lost its record): it is
    recorded from the listing at the next tick, once, instead of being announced as new."""
    log.info("%s %s already finished (%s)", kind.noun, name, state.value)
    return Decision(
        False, Reason.RUN_IN_PROGRESS, f"{kind.noun} {name} already ran ({state.value})"
    )


def _duration(delay: timedelta) -> str:
    seconds = int(delay.total_seconds())
    return f"{seconds // 60} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds} s"
