"""What the controller keeps per table so that a step that cannot work is tried once and said once.

Four records, kept in the table's memory (``HeldSteps``, ``controller.memory``) and forgotten
with it:

* refused launches: a launch the launcher refused for good (``PermanentLaunchError``: the
  cluster does not serve the backend's kind, a run name that cannot be built, a reserved
  ``sparkConf`` key of a policy stored before the CRD refused them) is not tried again while the
  policy and the table are what they were (their generations); the decision becomes
  ``RunRejected``. A launch refused for want of permission (HTTP 401/403) is held the same way
  but only until its retry time: an administrator can give the permission back without
  touching the policy, so it is tried again after a back-off that doubles at each refusal;
* unsupported steps: a step that failed because the table has a feature it cannot handle (an
  ``UnsupportedFeatureError`` of the engine, or a job's result line with ``errorType``
  ``UnsupportedFeature``) is not tried again while the table's protocol is what it was; its
  decision becomes ``UnsupportedTableFeature`` while the other steps go on, with no back-off;
* announcements: the status changes an on-call engineer must act on (the log became unreadable,
  a step was refused or cannot work) are posted as one Warning Event per change, also when the
  status write of the tick that announced it is not yet seen by the next tick;
* spent approvals: the plan approval the last approved compaction run was started with, so a
  second run is never started on it even before the status that records it is read back.

A restarted controller forgets them: it tries each held step once more and, finding the status
already saying the same, announces nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from txntable.api.conditions import Condition, ConditionType, EventReason, Reason
from txntable.api.types import RunKind
from txntable.controller.memory import TableMemories
from txntable.reconcile.decide import Decision
from txntable.reconcile.health import TableHealth
from txntable.reconcile.status import UNREACHABLE

_STEP = (Reason.RUN_REJECTED, Reason.RUN_LAUNCH_FAILED, Reason.UNSUPPORTED_TABLE_FEATURE)
#: Condition types whose reasons are announced once per change, and the reasons that are.
ANNOUNCED: dict[ConditionType, tuple[Reason, ...]] = {
    ConditionType.REACHABLE: UNREACHABLE,
    ConditionType.COMPACTING: _STEP,
    ConditionType.VACUUMING: _STEP,
    ConditionType.CHECKPOINTING: _STEP,
}

Signature = tuple[object, ...]


def protocol_of(health: TableHealth) -> Signature:
    """What a table feature's support depends on: the table's protocol."""
    return (
        health.min_reader_version,
        health.min_writer_version,
        tuple(health.reader_features),
        tuple(health.writer_features),
    )


@dataclass(frozen=True)
class _Refusal:
    signature: Signature
    message: str
    #: when a refusal that may pass (a permission) is tried again; None: held for good
    retry_at: datetime | None = None
    delay: timedelta | None = None


@dataclass
class HeldSteps:
    """One table's sub-record of ``Holds``."""

    refused: dict[RunKind, _Refusal] = field(default_factory=dict)
    unsupported: dict[RunKind, tuple[Signature, str]] = field(default_factory=dict)
    announced: dict[str, Reason] = field(default_factory=dict)
    spent: str | None = None


@dataclass
class Holds:
    """Per table: refused launches, unsupported steps, announced changes, spent approval."""

    memories: TableMemories = field(default_factory=TableMemories)

    def _of(self, key: str) -> HeldSteps:
        return self.memories.of(key, HeldSteps)

    # -- refused launches and unsupported steps ---------------------------------------------
    def refuse(self, key: str, kind: RunKind, signature: Signature, message: str) -> Decision:
        """Remember that ``kind`` was refused for good under ``signature``; the decision to
        show instead of the launch."""
        self._of(key).refused[kind] = _Refusal(signature, message)
        return _held(Reason.RUN_REJECTED, message)

    def refuse_for_now(
        self,
        key: str,
        kind: RunKind,
        signature: Signature,
        message: Callable[[datetime], str],
        *,
        now: datetime,
        back_off: tuple[timedelta, timedelta],
    ) -> Decision:
        """Remember that ``kind`` was refused under ``signature`` by something that may pass
        (a permission): held until ``back_off[0]`` after the first such refusal, twice the last
        delay after each further one, at most ``back_off[1]``; the decision to show, whose
        message is ``message(retry time)``."""
        first, most = back_off
        table = self._of(key)
        last = table.refused.get(kind)
        delay = first
        if last is not None and last.signature == signature and last.delay is not None:
            delay = min(last.delay * 2, most)
        said = message(now + delay)
        table.refused[kind] = _Refusal(signature, said, now + delay, delay)
        return _held(Reason.RUN_REJECTED, said)

    def launched(self, key: str, kind: RunKind) -> None:
        """``kind`` was launched: a refusal remembered for it (and its back-off) is over."""
        self._of(key).refused.pop(kind, None)

    def unsupported(self, key: str, kind: RunKind, signature: Signature, message: str) -> None:
        """Remember that ``kind`` cannot work on the table while its protocol is ``signature``."""
        self._of(key).unsupported[kind] = (signature, message)

    def hold(
        self,
        key: str,
        kind: RunKind,
        decision: Decision,
        *,
        refused_under: Signature,
        protocol: Signature,
        now: datetime,
    ) -> Decision:
        """``decision``, unless ``kind`` was refused under ``refused_under`` (the policy and
        table as they are now) and its retry time, if it has one, is not yet ``now``, or
        ``kind`` was found unsupported under ``protocol``: then the held decision. A hold whose
        signature changed is dropped (the step is tried again); a refusal whose retry time has
        come is kept, so that a further refusal doubles its back-off."""
        found = self.unsupported_hold(key, kind, protocol)
        if found is not None:
            return found
        table = self._of(key)
        refused = table.refused.get(kind)
        if refused is not None:
            if refused.signature != refused_under:
                del table.refused[kind]
            elif refused.retry_at is None or now < refused.retry_at:
                return _held(Reason.RUN_REJECTED, refused.message)
        return decision

    def unsupported_hold(self, key: str, kind: RunKind, protocol: Signature) -> Decision | None:
        """The held decision when ``kind`` cannot work on the table's ``protocol``, else None
        (a hold for another protocol is dropped)."""
        table = self._of(key)
        known = table.unsupported.get(kind)
        if known is None:
            return None
        if known[0] == protocol:
            return _held(Reason.UNSUPPORTED_TABLE_FEATURE, known[1])
        del table.unsupported[kind]
        return None

    # -- spent approvals --------------------------------------------------------------------
    def spend(self, key: str, plan_id: str) -> None:
        self._of(key).spent = plan_id

    def spent(self, key: str) -> str | None:
        return self._of(key).spent

    # -- announcements ----------------------------------------------------------------------
    def announcements(
        self, key: str, before: Sequence[Condition], after: Sequence[Condition]
    ) -> list[tuple[EventReason, str]]:
        """(reason, message) of a Warning Event for each condition of ``ANNOUNCED`` that now
        has one of its announced reasons and had another before (in the status read, and in
        what this controller announced last)."""
        table = self._of(key)
        old = {c.type: c for c in before}
        out: list[tuple[EventReason, str]] = []
        for cond in after:
            reasons = ANNOUNCED.get(ConditionType(cond.type)) if _known(cond.type) else None
            if not reasons or cond.is_true or cond.reason not in reasons:
                table.announced.pop(cond.type, None)
                continue
            prior = old.get(cond.type)
            said = prior is not None and not prior.is_true and prior.reason == cond.reason
            if said or table.announced.get(cond.type) == cond.reason:
                table.announced[cond.type] = Reason(cond.reason)
                continue
            table.announced[cond.type] = Reason(cond.reason)
            what = "" if cond.type == ConditionType.REACHABLE else f"{cond.type}: "
            out.append((EventReason(str(cond.reason)), f"{what}{cond.message}"[:1024]))
        return out


def _known(type_: str) -> bool:
    return type_ in ConditionType._value2member_map_


def _held(why: Reason, message: str) -> Decision:
    return Decision(False, why, message)
