"""Status conditions in the shape of ``metav1.Condition``, and the rules for changing them.

A condition's ``lastTransitionTime`` moves only when its ``status`` flips; reason, message and
``observedGeneration`` may change without a transition. ``set_condition`` never mutates its
input: it returns a new tuple, so the caller can compare old and new status and write only
when something changed (conventions.md item 4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from txntable.api.errors import InvalidSpecError

# metav1.Condition's validation: reason is CamelCase-ish, message at most 32768 characters.
REASON_PATTERN: Final = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
TYPE_PATTERN: Final = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
MAX_MESSAGE: Final = 32768


class ConditionStatus(StrEnum):
    """The three values ``metav1.ConditionStatus`` allows."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    """Condition types txntable writes; other types are kept as they are."""

    READY = "Ready"
    REACHABLE = "Reachable"
    COMPACTING = "Compacting"
    VACUUMING = "Vacuuming"
    CHECKPOINTING = "Checkpointing"
    DEGRADED = "Degraded"
    SPEC_VALID = "SpecValid"
    POLICY_RESOLVED = "PolicyResolved"
    SCHEDULED = "Scheduled"


class Reason(StrEnum):
    """CamelCase reasons, one per situation the controller reports: what it observed, and
    why a run did or did not start (``reconcile.decide``)."""

    TABLE_HEALTHY = "TableHealthy"
    TABLE_NOT_FOUND = "TableNotFound"
    STORAGE_UNREACHABLE = "StorageUnreachable"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_UNREADABLE = "SecretUnreadable"
    CORRUPT_LOG = "CorruptLog"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    INVALID_SPEC = "InvalidSpec"
    SPEC_ACCEPTED = "SpecAccepted"
    SUSPENDED = "Suspended"
    POLICY_NOT_FOUND = "PolicyNotFound"
    POLICY_CONFLICT = "PolicyConflict"
    POLICY_MATCHED = "PolicyMatched"
    NO_POLICY = "NoPolicy"
    RUN_STARTED = "RunStarted"
    RUN_CANNOT_START = "RunCannotStart"
    RUN_SUCCEEDED = "RunSucceeded"
    RUN_FAILED = "RunFailed"
    RUN_CONFLICTED = "RunConflicted"
    RUN_REJECTED = "RunRejected"
    RUN_LAUNCH_FAILED = "RunLaunchFailed"
    UNSUPPORTED_TABLE_FEATURE = "UnsupportedTableFeature"
    NOTHING_TO_DO = "NothingToDo"
    IDLE = "Idle"
    OUTSIDE_MAINTENANCE_WINDOW = "OutsideMaintenanceWindow"
    AS_EXPECTED = "AsExpected"
    # decisions (reconcile.decide): why a run starts now, or why not
    TRIGGERED = "Triggered"
    TABLE_SUSPENDED = "TableSuspended"
    POLICY_SUSPENDED = "PolicySuspended"
    RUN_IN_PROGRESS = "RunInProgress"
    CONCURRENCY_LIMIT = "ConcurrencyLimit"
    COOLDOWN = "Cooldown"
    NOT_DUE = "NotDue"
    BACKING_OFF = "BackingOff"
    DISABLED = "Disabled"
    CONFLICT_BACK_OFF = "ConflictBackOff"
    AWAITING_APPROVAL = "AwaitingApproval"


class EventReason(StrEnum):
    """CamelCase reasons of the Kubernetes Events the controller posts on a table or policy: one
    per thing that happened to a run, the two holds announced once, and the changes of status an
    on-call engineer must act on, announced once per change (each the ``Reason`` of the same
    name). docs/operations.md lists them; a run's end is ``Run<RunOutcome>`` (``for_outcome``)."""

    RUN_STARTED = "RunStarted"
    RUN_CANNOT_START = "RunCannotStart"
    RUN_SUCCEEDED = "RunSucceeded"
    RUN_NOTHING_TO_DO = "RunNothingToDo"
    RUN_CONFLICTED = "RunConflicted"
    RUN_FAILED = "RunFailed"
    RUN_OUT_OF_MEMORY = "RunOutOfMemory"
    RUN_REJECTED = "RunRejected"
    RUN_LAUNCH_FAILED = "RunLaunchFailed"
    RUN_LIST_FAILED = "RunListFailed"
    AWAITING_APPROVAL = "AwaitingApproval"
    CONFLICT_BACK_OFF = "ConflictBackOff"
    # what became of the table, announced once per change of its status (``Reason`` of the
    # same name): its log cannot be read, a step cannot work on it
    TABLE_NOT_FOUND = "TableNotFound"
    STORAGE_UNREACHABLE = "StorageUnreachable"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_UNREADABLE = "SecretUnreadable"
    CORRUPT_LOG = "CorruptLog"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_TABLE_FEATURE = "UnsupportedTableFeature"
    INVALID_SPEC = "InvalidSpec"

    @classmethod
    def for_outcome(cls, outcome: str) -> EventReason:
        """The event reason of a run that ended with ``outcome`` (a finished ``RunOutcome``)."""
        return cls(f"Run{outcome}")


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event to post on a table or a policy (type Normal/Warning, a CamelCase
    ``EventReason``): what a tick or a policy's judgement says happened, whoever posts it."""

    type: str
    reason: EventReason
    message: str


@dataclass(frozen=True)
class Condition:
    """One ``metav1.Condition``: what is (not) the case, why, since when, for which generation."""

    type: str
    status: ConditionStatus
    #: a ``Reason`` (every condition txntable writes has one); a condition another writer set
    #: keeps the text of its own reason
    reason: Reason | str
    message: str
    last_transition_time: datetime
    observed_generation: int | None = None

    def __post_init__(self) -> None:
        known = Reason._value2member_map_.get(self.reason)
        if isinstance(known, Reason) and known is not self.reason:
            object.__setattr__(self, "reason", known)  # read back as text: our reason again
        if not TYPE_PATTERN.match(self.type) or len(self.type) > 316:
            raise InvalidSpecError("type", f"{self.type!r} is not a valid condition type")
        if not REASON_PATTERN.match(self.reason) or len(self.reason) > 1024:
            raise InvalidSpecError("reason", f"{self.reason!r} is not a CamelCase reason")
        if len(self.message) > MAX_MESSAGE:
            raise InvalidSpecError("message", f"longer than {MAX_MESSAGE} characters")
        if self.observed_generation is not None and self.observed_generation < 0:
            raise InvalidSpecError("observedGeneration", "must be >= 0")

    @property
    def is_true(self) -> bool:
        """True when ``status`` is ``"True"``."""
        return self.status is ConditionStatus.TRUE

    def to_dict(self) -> dict[str, object]:
        """The JSON object the API server stores."""
        out: dict[str, object] = {
            "type": self.type,
            "status": self.status.value,
            "reason": str(self.reason),
            "message": self.message,
            "lastTransitionTime": format_time(self.last_transition_time),
        }
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out

    @classmethod
    def from_dict(cls, obj: Mapping[str, object]) -> Condition:
        """Read a condition written by the API server (or by ``to_dict``)."""
        try:
            status = ConditionStatus(str(obj["status"]))
            generation = obj.get("observedGeneration")
            return cls(
                type=str(obj["type"]),
                status=status,
                reason=str(obj.get("reason", "")),
                message=str(obj.get("message", "")),
                last_transition_time=parse_time(str(obj["lastTransitionTime"])),
                observed_generation=int(generation) if isinstance(generation, int) else None,
            )
        except (KeyError, ValueError) as exc:
            raise InvalidSpecError("conditions", f"not a condition: {exc}") from exc


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as ``metav1.Time`` serializes."""
    if moment.tzinfo is None:
        raise ValueError("condition times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time (``Z`` or an offset) into an aware UTC datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.astimezone(UTC)


def get_condition(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """The condition of ``type_``, or None."""
    return next((c for c in conditions if c.type == type_), None)


def is_condition_true(conditions: Iterable[Condition], type_: str) -> bool:
    """True when a condition of ``type_`` exists with status ``"True"``."""
    found = get_condition(conditions, type_)
    return found is not None and found.is_true


def set_condition(
    conditions: Iterable[Condition],
    type_: str,
    status: ConditionStatus | bool,
    reason: Reason,
    message: str,
    *,
    observed_generation: int | None,
    now: datetime,
) -> tuple[Condition, ...]:
    """Return the conditions with ``type_`` set; the transition time moves only on a flip.

    The order of existing conditions is kept; a new type is appended.
    """
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    current = tuple(conditions)
    existing = get_condition(current, type_)
    if existing is None:
        fresh = Condition(type_, status, reason, message, now, observed_generation)
        return (*current, fresh)
    moved = existing.status is not status
    updated = replace(
        existing,
        status=status,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
        last_transition_time=now if moved else existing.last_transition_time,
    )
    return tuple(updated if c.type == type_ else c for c in current)


#: what a SpecValid condition says once the spec validates again
SPEC_ACCEPTED_MESSAGE = "the spec validates"


def spec_accepted(
    conditions: Iterable[Condition], *, observed_generation: int | None, now: datetime
) -> tuple[Condition, ...]:
    """The conditions of a resource whose spec validates: a SpecValid condition left False by
    an earlier, invalid spec (``reconcile.status.invalid_spec_status``) flips to True, so the
    status no longer says the spec is invalid beside a Ready that says all is well. A resource
    that never had an invalid spec gets no SpecValid condition: nothing changes for it."""
    current = tuple(conditions)
    if get_condition(current, ConditionType.SPEC_VALID) is None:
        return current
    return set_condition(
        current,
        ConditionType.SPEC_VALID,
        True,
        Reason.SPEC_ACCEPTED,
        SPEC_ACCEPTED_MESSAGE,
        observed_generation=observed_generation,
        now=now,
    )


def remove_condition(conditions: Iterable[Condition], type_: str) -> tuple[Condition, ...]:
    """Return the conditions without ``type_``."""
    return tuple(c for c in conditions if c.type != type_)
