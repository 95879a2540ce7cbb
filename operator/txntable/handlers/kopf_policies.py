"""The policies' Kopf glue: their indexes, their status timers and their judge handlers.

Thin: each handler reads what Kopf gives (the body, the indexes, the memo) and calls the policy
driver (``handlers.policy_driver``), which judges the policy, writes its status through the one
status writer and hands its Events back to be posted with ``kopf.event``. A policy's memory is
forgotten when Kopf reports it gone (the judge handlers see every event of a policy, its
``DELETED`` one included). The indexes give every table tick its namespace's policies
(``handlers.kopf_handlers._policies``). Handler ids are unique across resources: Kopf mixes up
handlers that share one.
"""

from __future__ import annotations

from typing import Any

import kopf

from txntable.api.conditions import Event
from txntable.api.constants import (
    GROUP,
    PLURAL_CHECKPOINT_POLICY,
    PLURAL_COMPACTION_POLICY,
    VERSION,
)
from txntable.api.errors import InvalidSpecError
from txntable.handlers.kopf_glue import CONFIG, drop_legacy_finalizer, mine, shed, started
from txntable.handlers.policy_driver import PARSERS, PolicyKind
from txntable.handlers.status_writer import Current


def _without_status(body: kopf.Body) -> dict[str, Any]:
    """A policy as table ticks need it: a policy's status lists every table it matches, so
    keeping it would make each tick's policy reading grow with the number of tables."""
    return {k: v for k, v in body.items() if k != "status"}


@kopf.index(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="compaction_policies")
def compaction_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    shed(body)
    return {namespace or "default": _without_status(body)}


@kopf.index(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="checkpoint_policies")
def checkpoint_policies(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[str, Any]:
    shed(body)
    return {namespace or "default": _without_status(body)}


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL_COMPACTION_POLICY,
    id="compaction-policy-status",
    interval=CONFIG.observe_interval_seconds,
)
def compaction_policy_status(*, body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    _policy_timer("compaction", body, patch, **kwargs)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL_CHECKPOINT_POLICY,
    id="checkpoint-policy-status",
    interval=CONFIG.observe_interval_seconds,
)
def checkpoint_policy_status(*, body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    _policy_timer("checkpoint", body, patch, **kwargs)


def _policy_timer(kind: PolicyKind, live: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    """Status of a policy: validity, matched tables, active and last runs, next schedule
    (``PolicyDriver.tick``). One reading of the object serves the whole tick: a timer's body is
    a live view that Kopf replaces when a watch event of the object arrives, so the tick
    judges, writes and announces one version of it."""
    body = kopf.Body(dict(live))  # type: ignore[arg-type]
    state = started(kwargs.get("memo"))
    if state is None or state.policies is None or not mine(state, body):
        return  # before start-up, or another replica holds its shard and writes its status
    drop_legacy_finalizer(body, patch)
    try:
        policy = PARSERS[kind](dict(body))
    except InvalidSpecError as exc:
        state.policies.say_invalid(kind, body, str(exc))
        return
    namespace = policy.metadata.namespace or "default"
    if not state.tables.complete():
        return  # at start, before every table is listed: it would count too few
    policies = kwargs[f"{kind}_policies"].get(namespace)
    view = state.policies.view(policy, policies, state.tables.bodies(namespace))

    def post(event: Event) -> None:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)

    state.policies.tick(policy, view, Current.of(body), sink=post)


@kopf.on.event(GROUP, VERSION, PLURAL_COMPACTION_POLICY, id="judge-compaction-policy")
def judge_compaction_policy(
    *, body: kopf.Body, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    """Say at once that a new or edited policy is invalid, instead of at its timer's next
    firing (an event handler: Kopf keeps no record of it on the object); forget a deleted
    one."""
    _judge_policy("compaction", body, memo, type)


@kopf.on.event(GROUP, VERSION, PLURAL_CHECKPOINT_POLICY, id="judge-checkpoint-policy")
def judge_checkpoint_policy(
    *, body: kopf.Body, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    _judge_policy("checkpoint", body, memo, type)


def _judge_policy(kind: PolicyKind, body: kopf.Body, memo: kopf.Memo, type: str | None) -> None:
    """An invalid policy's conditions (``PolicyDriver.judge``), unless it is being deleted; a
    policy gone (its ``DELETED`` event) is forgotten (``PolicyDriver.forget``)."""
    state = started(memo)
    if state is None or state.policies is None:
        return
    meta = body.get("metadata") or {}
    if type == "DELETED":
        state.policies.forget(kind, meta.get("namespace"), str(meta.get("name")), meta.get("uid"))
        return
    if meta.get("deletionTimestamp") or not mine(state, body):
        return  # a deletion's events; another replica's policy
    state.policies.judge(kind, body)
