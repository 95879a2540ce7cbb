"""One policy's status tick, for every caller: the Kopf timer and judge handlers, local mode.

A CompactionPolicy's or CheckpointPolicy's status says whether it is valid, which tables it
governs, their active and last runs and its next schedule (``reconcile.policy_status``). Its
tick used to live in the Kopf glue: its status went through Kopf's ``patch.status`` (against
the body Kopf handed over, which may lag behind a write of ours), the Invalid reasons it had
announced sat in a dict beside the tables' memory that nothing pruned when a policy was
deleted, and local mode had no policy status at all. ``PolicyDriver`` does it once, the way
``handlers.driver.Driver`` does a table's tick:

1. the policy's lock (its timer and its judge handler never write it at once);
2. the newest status known for it (``StatusWriter.newest``), asked under that lock: the tick
   starts from it, and a write of the tick it waited for is not made twice;
3. its next status (``governed_status``, from who governs what in its namespace), written by
   the one status writer (``handlers.status_writer``) when it changed; an invalid spec's
   conditions, when they are not said already (transition times aside);
4. one Warning Event when it becomes Invalid for a reason only the controller sees (a schedule
   that never fires), handed to the caller's sink (``kopf.event`` in the cluster, the printer in
   local mode).

What it keeps of a policy is a ``PolicyDriven`` sub-record of the policy's memory
(``controller.memory``: the one per-object memory, keyed by uid; a policy's key is its uid, so it
never meets a table's), with what the status writer keeps of it (``Written``); ``forget`` drops
both when the policy is deleted. Kopf-free: what Kopf gives (bodies, indexes, the memo) stays in
the glue (``handlers.kopf_policies``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from txntable.api.conditions import ConditionType, Event, EventReason, Reason
from txntable.api.errors import InvalidSpecError
from txntable.api.meta import resource_key
from txntable.api.types import CheckpointPolicy, CompactionPolicy, PolicyStatus, TxnTable
from txntable.controller.memory import TableMemories
from txntable.handlers.governed_views import GovernedViews
from txntable.handlers.parsed_resources import ParsedResources
from txntable.handlers.status_writer import Current, StatusWriter, WriteResult
from txntable.reconcile.policy_status import Governed, governed_status
from txntable.reconcile.status import invalid_spec_status

Policy = CompactionPolicy | CheckpointPolicy
#: the two kinds of policy, as ``resolve``, ``govern`` and the indexes name them
PolicyKind = Literal["compaction", "checkpoint"]
KINDS: tuple[PolicyKind, ...] = ("compaction", "checkpoint")
#: each kind's parser
PARSERS: Mapping[PolicyKind, Callable[[Any], Policy]] = {
    "compaction": CompactionPolicy.from_manifest,
    "checkpoint": CheckpointPolicy.from_manifest,
}
#: Where a policy tick's Events go (``kopf.event`` on the policy, or local mode's printer).
PolicySink = Callable[[Event], None]


def kind_of(policy: Policy) -> PolicyKind:
    return "compaction" if isinstance(policy, CompactionPolicy) else "checkpoint"


def policy_key(kind: PolicyKind, namespace: str | None, name: str, uid: str | None) -> str:
    """A policy's key in the per-object memory: its uid; without one (a manifest read in local
    mode), its kind, namespace and name, so that it never shares a table's key."""
    return uid or f"{kind}-policy:{resource_key(namespace, name)}"


@dataclass
class PolicyDriven:
    """One policy's sub-record of the policy driver (``controller.memory``)."""

    #: held while its status is judged and written (its timer and its judge handler)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the Invalid message announced last by a Warning Event (None: none since it was valid)
    said: str | None = None


@dataclass
class PolicyDriver:
    """Writes policies' statuses for the Kopf handlers and for local mode, the same way."""

    memories: TableMemories
    #: the status writer of each kind (each writes its kind's status subresource)
    writers: Mapping[PolicyKind, StatusWriter]
    #: policies and tables parsed once per resourceVersion (shared with the tables' ticks)
    parsed: ParsedResources = field(default_factory=ParsedResources)
    #: who governs what in each namespace, shared by the policies' ticks
    governed: GovernedViews = field(default_factory=GovernedViews)

    def view(
        self,
        policy: Policy,
        policy_bodies: Iterable[Mapping[str, Any]] | None,
        table_bodies: Iterable[Mapping[str, Any]] | None,
    ) -> Governed:
        """Who governs what among the tables of ``policy``'s namespace (``table_bodies``), for
        its kind's policies there (``policy_bodies``; this version of ``policy`` among them)."""
        kind = kind_of(policy)
        namespace = policy.metadata.namespace or "default"
        rivals = self.parsed.parse_all(policy_bodies, PARSERS[kind])
        kin = [*(p for p in rivals if p.metadata.name != policy.metadata.name), policy]
        parsed = self.parsed

        def parse_tables(bodies: Any) -> list[TxnTable]:
            return parsed.parse_all(bodies, TxnTable.from_manifest)

        return self.governed.governed(namespace, kind, table_bodies, kin, parse_tables)

    def tick(
        self,
        policy: Policy,
        governed: Governed,
        current: Current,
        *,
        sink: PolicySink,
        now: datetime | None = None,
    ) -> PolicyStatus:
        """Judge ``policy`` from ``governed`` (``view``, or ``govern`` over local mode's tables)
        and write its status if it changed (``current``: what the caller read of it); a policy
        that becomes Invalid for a reason only the controller sees is announced once. Returns
        its status (the one written, or the one already there)."""
        kind = kind_of(policy)
        meta = policy.metadata
        key = policy_key(kind, meta.namespace, meta.name, meta.uid)
        driven = self.memories.of(key, PolicyDriven)
        with driven.lock:
            policy = self._from_newest(policy, key, current)
            status = governed_status(policy, governed, now or datetime.now(UTC))
            rendered = status.to_status()
            namespace = meta.namespace or "default"
            # the whole status: a field it no longer has (the next schedule time of a policy
            # whose schedule was removed) is deleted, not left to say something false
            written = self.writers[kind].write(key, namespace, meta.name, current, rendered)
            if written is not WriteResult.UNCHANGED:
                self._announce_invalid(driven, policy.status, status, sink)
        return status

    def say_invalid(self, kind: PolicyKind, body: Mapping[str, Any], message: str) -> WriteResult:
        """Write an invalid policy's conditions unless the newest status known for it says them
        already (at each attempt the conditions' transition times are new: comparing them would
        write every time); the rest of its status stays."""
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", str(meta.get("name"))
        key = policy_key(kind, namespace, name, meta.get("uid"))
        current = Current.of(body)
        new = invalid_spec_status(meta.get("generation"), message, datetime.now(UTC))
        with self.memories.of(key, PolicyDriven).lock:
            if _said(self.writers[kind].newest(key, current), new):
                return WriteResult.UNCHANGED
            return self.writers[kind].write(key, namespace, name, current, new, whole=False)

    def judge(self, kind: PolicyKind, body: Mapping[str, Any]) -> None:
        """Say at once that a new or edited policy is invalid: its conditions, written once
        per generation and reason (the event of our own write, or any later event of the same
        version of the spec, finds them said). A valid one is left to its tick."""
        spec_only = {k: v for k, v in body.items() if k != "status"}
        for message in self.parsed.invalid([spec_only], PARSERS[kind]).values():
            self.say_invalid(kind, body, message)

    def forget(self, kind: PolicyKind, namespace: str | None, name: str, uid: str | None) -> None:
        """Forget everything kept of a deleted policy (``TableMemories.forget``): what this
        driver and the status writer kept of it."""
        self.memories.forget(policy_key(kind, namespace, name, uid))

    def _from_newest(self, policy: Policy, key: str, current: Current) -> Policy:
        """``policy`` starting from the newest status known for it (``Driver._from_newest``)."""
        newest = self.writers[kind_of(policy)].newest(key, current)
        if newest is current.status:
            return policy
        try:
            return replace(policy, status=PolicyStatus.from_dict(dict(newest)))
        except InvalidSpecError:  # a status the server kept that we cannot read back
            return policy

    @staticmethod
    def _announce_invalid(
        driven: PolicyDriven, before: PolicyStatus, after: PolicyStatus, sink: PolicySink
    ) -> None:
        """One Warning Event when a policy becomes Invalid for a reason only the controller
        sees (a schedule that never fires), not one per tick: neither the status read nor this
        process (``driven.said``: what it announced last; the status write may lag) said it."""
        new = next((c for c in after.conditions if c.type == ConditionType.READY), None)
        if new is None or new.is_true or new.reason != Reason.INVALID_SPEC:
            driven.said = None
            return
        old = next((c for c in before.conditions if c.type == ConditionType.READY), None)
        known = old is not None and old.reason == new.reason and old.message == new.message
        if known or driven.said == new.message:
            driven.said = new.message
            return
        driven.said = new.message
        sink(Event("Warning", EventReason.INVALID_SPEC, new.message))


def _said(status: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``status`` already says what ``new`` does, transition times aside."""

    def gist(s: Mapping[str, Any]) -> tuple[Any, ...]:
        conds = sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in s.get("conditions") or ()
        )
        return s.get("phase"), s.get("observedGeneration"), conds

    return gist(status) == gist(new)
